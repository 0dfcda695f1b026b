"""petastream.compat.fs_utils: Petastorm's URL checks, paths and messages (recorded from
Petastorm 0.13.1), with fsspec filesystems where Petastorm returned pyarrow's legacy one."""

import pickle
from urllib.parse import urlparse

import fsspec
import pytest
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from petastream.compat.fs_utils import (
    FilesystemResolver,
    get_filesystem_and_path_or_paths,
    normalize_dir_url,
)
from petastream.errors import InvalidArgumentError


def test_file_url_resolves_to_local_filesystem_and_path(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    resolver = FilesystemResolver(f"file://{tmp_path}/")
    assert isinstance(resolver.filesystem(), LocalFileSystem)
    assert resolver.get_dataset_path() == f"{tmp_path}/"
    assert resolver.parsed_dataset_url() == urlparse(f"file://{tmp_path}/")
    # the legacy filesystem's calls users made
    assert resolver.filesystem().exists(str(tmp_path / "a.txt"))
    assert resolver.filesystem().ls(str(tmp_path)) == [str(tmp_path / "a.txt")]


def test_factory_pickles_and_resolver_does_not():
    resolver = FilesystemResolver("file:///tmp")
    assert isinstance(pickle.loads(pickle.dumps(resolver.filesystem_factory()))(), LocalFileSystem)
    with pytest.raises(RuntimeError, match="Pickling FilesystemResolver is not supported"):
        pickle.dumps(resolver)


def test_other_schemes_go_to_fsspec_with_storage_options():
    resolver = FilesystemResolver(urlparse("memory://bucket/p"))
    assert isinstance(resolver.filesystem(), MemoryFileSystem)
    assert resolver.get_dataset_path() == "/bucket/p"  # Petastorm's (fsspec's strip_protocol)


@pytest.mark.parametrize("url, error, message", [
    ("/abs/path", ValueError, 'A scheme-less dataset url .* Please prepend "file://"'),
    ("s3:///foo/bar", ValueError, "URLs must be of the form s3://bucket/path"),
    ("unknown://foo/bar", ValueError, "Protocol not known: unknown"),
])
def test_url_errors_are_petastorm_s(url, error, message):
    with pytest.raises(error, match=message):
        FilesystemResolver(url)


def test_refused_arguments_name_themselves():
    with pytest.raises(InvalidArgumentError, match="connector"):
        FilesystemResolver("file:///tmp", connector=object())
    with pytest.raises(InvalidArgumentError, match="hdfs_driver='jni'"):
        FilesystemResolver("file:///tmp", hdfs_driver="jni")


def test_get_filesystem_and_path_or_paths():
    fs, path = get_filesystem_and_path_or_paths("file:///tmp/a")
    assert isinstance(fs, LocalFileSystem) and path == "/tmp/a"
    fs, paths = get_filesystem_and_path_or_paths(["file:///tmp/a", "file:///tmp/b"])
    assert paths == ["/tmp/a", "/tmp/b"]
    given = fsspec.filesystem("memory")
    assert get_filesystem_and_path_or_paths("memory://b/x", filesystem=given) == (given, "/b/x")
    with pytest.raises(ValueError, match="must contain url with the same scheme and netloc"):
        get_filesystem_and_path_or_paths(["file:///tmp/a", "s3://b/x"])


def test_normalize_dir_url():
    assert normalize_dir_url("file:///a/b/") == normalize_dir_url("file:///a/b") == "file:///a/b"
    with pytest.raises(ValueError, match="directory url must be a string"):
        normalize_dir_url(None)
