"""Messages for a person, and the error the explorer raises for input it cannot use.

A message is said once in English where it is made, and known everywhere else by its id, so
that a page in another language can say it too (``explorer/app/i18n``): the id is stable, the
fields are named, and a field may itself be a message (a reason inside a sentence)::

    raise ExplorerError("config.heads_divide_emb_dim",
                        "emb_dim ({emb_dim}) must be divisible by n_heads ({n_heads}).",
                        emb_dim=768, n_heads=5)

``str()`` of either is the English sentence, so a notebook reader sees what the page shows.
``ExplorerError`` is a ``ValueError``: bad input, never a bug in the explorer.

A text the core hands out as data rather than raises (a note, a caption, a progress report) is
a ``Text``: a ``str`` in English, to compare, join and save as any other, that carries its
message for the page.
"""
from __future__ import annotations


class Message:
    """A sentence for a person: a stable ``id``, its English ``text`` with ``{fields}``, and
    the fields' values (numbers, names, or other messages)."""

    __slots__ = ("id", "text", "fields")

    def __init__(self, id: str, text: str, **fields):
        self.id, self.text, self.fields = id, text, fields

    def __str__(self) -> str:
        return self.text.format(**self.fields)

    def __format__(self, spec: str) -> str:      # a message inside another one's text
        return format(str(self), spec)

    def __repr__(self) -> str:
        try:
            shown = str(self)
        except (KeyError, IndexError):   # a template, its fields still to come
            shown = self.text
        return f"Message({self.id!r}, {shown!r})"

    def __eq__(self, other) -> bool:
        return (isinstance(other, Message) and (self.id, self.text, self.fields)
                == (other.id, other.text, other.fields))

    def __hash__(self) -> int:
        return hash((self.id, self.text))


class ExplorerError(ValueError):
    """Input the explorer cannot use (a config, a prompt, a file, a setting), with a message
    that says what to do instead. Anything else raised is a bug."""

    def __init__(self, id: str, text: str, **fields):
        self.message = Message(id, text, **fields)
        super().__init__(str(self.message))

    @classmethod
    def of(cls, message: Message) -> "ExplorerError":
        """The error that says ``message`` (one made where the problem was described)."""
        return cls(message.id, message.text, **message.fields)

    def __reduce__(self):        # pickled whole (a GPU call's worker raises it here)
        return ExplorerError.of, (self.message,)


class Text(str):
    """A message as a ``str`` (its English) that remembers the ``Message`` it says."""

    def __new__(cls, id: str, text: str, **fields):
        return cls.of(Message(id, text, **fields))

    @classmethod
    def of(cls, message: Message) -> "Text":
        text = str.__new__(cls, str(message))
        text.message = message
        return text

    def __reduce__(self):
        return Text.of, (self.message,)

    def __reduce__(self):                 # copy and pickle: str's own would lose the message
        return Text.of, (self.message,)
