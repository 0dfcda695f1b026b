"""Train a small classifier on the digits dataset with petastorm's PyTorch DataLoader."""

import argparse

import torch
import torch.nn.functional as F
from petastorm import TransformSpec, make_reader
from petastorm.pytorch import DataLoader


def _scale(row):
    row["pixels"] = row["pixels"].astype("float32").reshape(1, 28, 28) / 255.0
    return row


def run_epoch(model, optimizer, loader):
    model.train()
    for step, batch in enumerate(loader):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(batch["pixels"]), batch["label"].long())
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print("step {}: loss {:.4f}".format(step, loss.item()))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset-url", default="file:///tmp/digits")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    transform = TransformSpec(_scale, removed_fields=["row_id"])
    for _ in range(args.epochs):
        reader = make_reader(args.dataset_url, num_epochs=1, transform_spec=transform,
                             shuffle_rows=True, seed=7, workers_count=2)
        with DataLoader(reader, batch_size=args.batch_size) as loader:
            run_epoch(model, optimizer, loader)


if __name__ == "__main__":
    main()
