"""IMDB sentiment with Embedding + LSTM: a one-layer LSTM reads each review, and its
output at the review's last real token (not at the padding after it) feeds a linear
classifier (positive / negative).

Real IMDB is read from $VTL_DATA/aclImdb (see datasets_imdb.py); without it the
example trains on synthetic reviews and says so.
"""

from _common import imdb, report, setup

import vtl
from vtl import nn, optim


class SentimentLSTM(nn.Module):
    def __init__(self, vocab_size: int, embed: int = 32, hidden: int = 32,
                 pad_index: int = 0) -> None:
        super().__init__()
        self.pad_index = pad_index
        self.embedding = nn.Embedding(vocab_size, embed, padding_idx=pad_index)
        self.lstm = nn.LSTM(embed, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 2)

    def forward(self, ids):
        # ids: (batch, max_len), each review padded at the end with pad_index
        out, _ = self.lstm(self.embedding(ids))           # (batch, max_len, hidden)
        lengths = vtl.sum(ids != self.pad_index, axis=1)
        last = vtl.maximum(lengths - 1, 0)                  # an empty review reads position 0
        return self.head(out[vtl.arange(ids.shape[0]), last])


args = setup(__doc__.splitlines()[0], epochs=4, max_len=128)
epochs = 6 if args.quick else args.epochs
train, test, vocab = imdb(args.max_len, count=None if not args.quick else 256, quick=args.quick)
print(f"{len(train)} train / {len(test)} test reviews, vocabulary {len(vocab)}, "
      f"length {args.max_len}")

vtl.random.seed(0)
model = SentimentLSTM(len(vocab), pad_index=vocab.pad_index)
history = vtl.train.fit(
    model, vtl.data.DataLoader(train, batch_size=32, shuffle=True, seed=0),
    nn.CrossEntropyLoss(), optim.Adam(model.parameters(), lr=5e-3), epochs,
    val_loader=vtl.data.DataLoader(test, batch_size=128), clip_grad_norm=1.0)
report(history)
print(f"test accuracy: {history['val_accuracy'][-1]:.4f}")
