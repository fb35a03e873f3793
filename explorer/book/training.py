"""The book's training code (chapter 5, sections 5.1-5.2), with the book's names: the dataset
of sliding windows (``GPTDatasetV1``), its loader (``create_dataloader_v1``), the losses
(``calc_loss_batch``, ``calc_loss_loader``), the evaluation (``evaluate_model``), the loop
(``train_model_simple``) and the sample after each epoch (``generate_sample``: the book's
``generate_and_print_sample``, returning the text instead of printing it).

Two differences from the printed code, neither of which changes a number: the tokenizer is the
explorer's offline GPT-2 tokenizer (the book calls ``tiktoken.get_encoding("gpt2")``, which
downloads), and the checks of ``check_training_text`` give a student an actionable message
where the book's code would silently make an empty loader.
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset

from .errors import ExplorerError
from .generate import generate_text_simple
from .tokenizer import get_tokenizer

TRAIN_RATIO = 0.90   # the book's split: the first 90 % of the characters train, the rest validate
BOOK_SETTINGS = {    # section 5.2: what the book's call to train_model_simple uses
    "batch_size": 2, "lr": 0.0004, "weight_decay": 0.1, "eval_freq": 5, "eval_iter": 5,
    "start_context": "Every effort moves you", "seed": 123,
}
SAMPLE_TOKENS = 50   # generate_and_print_sample's max_new_tokens


# ---------------------------------------------------------------------------------------------
# Data (chapter 2's dataset, used again in chapter 5)
class GPTDatasetV1(Dataset):
    def __init__(self, txt, tokenizer, max_length, stride):
        self.input_ids = []
        self.target_ids = []

        # Tokenize the entire text
        token_ids = _encode(tokenizer, txt)

        # Use a sliding window to chunk the book into overlapping sequences of max_length
        for i in range(0, len(token_ids) - max_length, stride):
            input_chunk = token_ids[i:i + max_length]
            target_chunk = token_ids[i + 1: i + max_length + 1]
            self.input_ids.append(torch.tensor(input_chunk))
            self.target_ids.append(torch.tensor(target_chunk))

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, idx):
        return self.input_ids[idx], self.target_ids[idx]


def create_dataloader_v1(txt, batch_size=4, max_length=256, stride=128, shuffle=True,
                         drop_last=True, num_workers=0, tokenizer=None):
    # Initialize the tokenizer (the book: tiktoken.get_encoding("gpt2"); the same encoding)
    tokenizer = tokenizer or get_tokenizer()

    # Create dataset
    dataset = GPTDatasetV1(txt, tokenizer, max_length, stride)

    # Create dataloader
    dataloader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle,
        drop_last=drop_last,
        num_workers=num_workers
    )

    return dataloader


def _encode(tokenizer, txt):
    """The book's ``tokenizer.encode(txt, allowed_special={"<|endoftext|>"})`` for either a
    tiktoken encoding or the explorer's tokenizer."""
    if hasattr(tokenizer, "encoding"):
        return tokenizer.encode(txt, allow_special=True)
    return tokenizer.encode(txt, allowed_special={"<|endoftext|>"})


def split_text(text_data, train_ratio=TRAIN_RATIO):
    """The book's split by characters (section 5.1.3)."""
    split_idx = int(train_ratio * len(text_data))
    train_data = text_data[:split_idx]
    val_data = text_data[split_idx:]
    return train_data, val_data


def check_training_text(text_data, max_length, stride, batch_size, train_ratio=TRAIN_RATIO,
                        tokenizer=None) -> tuple[int, int]:
    """Raise a ValueError a student can act on if the book's loaders would come out empty
    (the book's code would then divide by zero or train nothing). Returns the number of
    training batches per epoch and of validation batches."""
    tokenizer = tokenizer or get_tokenizer()
    train_data, val_data = split_text(text_data, train_ratio)
    n_train, n_val = len(_encode(tokenizer, train_data)), len(_encode(tokenizer, val_data))
    train_windows = len(range(0, n_train - max_length, stride))
    val_windows = len(range(0, n_val - max_length, stride))
    total = n_train + n_val
    if train_windows < batch_size:
        need = max_length + 1 + (batch_size - 1) * stride
        raise ExplorerError("training.text_too_short", "The text is too short to train on: its "
                            "training part (the first {train_ratio:.0%} of the characters) has "
                            "{n_train:,} tokens, which gives {train_windows} window(s) of "
                            "{max_length} tokens, but one batch needs {batch_size}. It needs "
                            "about {need:,.0f} tokens in all (it has {total:,}): paste a longer "
                            "text, or choose a shorter context or a smaller batch.",
                            train_ratio=train_ratio, n_train=n_train, train_windows=train_windows,
                            max_length=max_length, batch_size=batch_size, need=need / train_ratio,
                            total=total)
    if val_windows < 1:
        raise ExplorerError("training.validation_too_short", "The validation part of the text "
                            "(the last {val_ratio:.0%} of the characters) has {n_val:,} tokens, "
                            "too few for one window of {max_length} tokens plus its next token. "
                            "Give a text of at least about {need:,.0f} tokens (it has "
                            "{total:,}), or choose a shorter context.", val_ratio=1 - train_ratio,
                            n_val=n_val, max_length=max_length,
                            need=(max_length + 1) / (1 - train_ratio), total=total)
    return train_windows // batch_size, -(-val_windows // batch_size)


# ---------------------------------------------------------------------------------------------
# Losses (section 5.1.3)
def calc_loss_batch(input_batch, target_batch, model, device):
    input_batch, target_batch = input_batch.to(device), target_batch.to(device)
    logits = model(input_batch)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), target_batch.flatten())
    return loss


def calc_loss_loader(data_loader, model, device, num_batches=None):
    total_loss = 0.
    if len(data_loader) == 0:
        return float("nan")
    elif num_batches is None:
        num_batches = len(data_loader)
    else:
        # Reduce the number of batches to match the total number of batches in the data loader
        # if num_batches exceeds the number of batches in the data loader
        num_batches = min(num_batches, len(data_loader))
    for i, (input_batch, target_batch) in enumerate(data_loader):
        if i < num_batches:
            loss = calc_loss_batch(input_batch, target_batch, model, device)
            total_loss += loss.item()
        else:
            break
    return total_loss / num_batches


# ---------------------------------------------------------------------------------------------
# Training (section 5.2)
def evaluate_model(model, train_loader, val_loader, device, eval_iter):
    model.eval()
    with torch.no_grad():
        train_loss = calc_loss_loader(train_loader, model, device, num_batches=eval_iter)
        val_loss = calc_loss_loader(val_loader, model, device, num_batches=eval_iter)
    model.train()
    return train_loss, val_loss


def text_to_token_ids(text, tokenizer):
    encoded = _encode(tokenizer, text)
    encoded_tensor = torch.tensor(encoded).unsqueeze(0)  # add batch dimension
    return encoded_tensor


def token_ids_to_text(token_ids, tokenizer):
    flat = token_ids.squeeze(0)  # remove batch dimension
    return tokenizer.decode(flat.tolist())


def generate_sample(model, tokenizer, device, start_context, max_new_tokens=SAMPLE_TOKENS):
    """The book's ``generate_and_print_sample``, returning the text instead of printing it."""
    model.eval()
    context_size = model.cfg.context_length  # the book: model.pos_emb.weight.shape[0]
    encoded = text_to_token_ids(start_context, tokenizer).to(device)
    with torch.no_grad():
        token_ids = generate_text_simple(
            model=model, idx=encoded,
            max_new_tokens=max_new_tokens, context_size=context_size
        )
    decoded_text = token_ids_to_text(token_ids, tokenizer)
    model.train()
    return decoded_text.replace("\n", " ")  # Compact print format


def generate_and_print_sample(model, tokenizer, device, start_context):
    print(generate_sample(model, tokenizer, device, start_context))


def train_model_simple(model, train_loader, val_loader, optimizer, device, num_epochs,
                       eval_freq, eval_iter, start_context, tokenizer, verbose=True):
    # Initialize lists to track losses and tokens seen
    train_losses, val_losses, track_tokens_seen = [], [], []
    tokens_seen, global_step = 0, -1

    # Main training loop
    for epoch in range(num_epochs):
        model.train()  # Set model to training mode

        for input_batch, target_batch in train_loader:
            optimizer.zero_grad()  # Reset loss gradients from previous batch iteration
            loss = calc_loss_batch(input_batch, target_batch, model, device)
            loss.backward()  # Calculate loss gradients
            optimizer.step()  # Update model weights using loss gradients
            tokens_seen += input_batch.numel()
            global_step += 1

            # Optional evaluation step
            if global_step % eval_freq == 0:
                train_loss, val_loss = evaluate_model(
                    model, train_loader, val_loader, device, eval_iter)
                train_losses.append(train_loss)
                val_losses.append(val_loss)
                track_tokens_seen.append(tokens_seen)
                if verbose:
                    print(f"Ep {epoch+1} (Step {global_step:06d}): "
                          f"Train loss {train_loss:.3f}, Val loss {val_loss:.3f}")

        # Print a sample text after each epoch
        sample = generate_sample(model, tokenizer, device, start_context)
        if verbose:
            print(sample)

    return train_losses, val_losses, track_tokens_seen
