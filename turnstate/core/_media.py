"""User content beyond text: images and PDF files, and the checks they pass (issue 23).

A user message is a tuple of parts: ``TextPart``, ``ImagePart`` and ``FilePart``
(``UserPart``). A media part holds either inline bytes (``data``, with its media type)
or an https ``url`` the provider fetches itself. The parts are plain data: building one
checks nothing, so ``TurnInput`` can refuse a bad one naming its index
(``content[1].url``); ``part_problem`` says what is wrong with one part.

Codecs write the parts in their wire forms; a model that does not take a part type
(``ModelInfo.inputs``) gets ``omitted_text`` in its place when history is replayed to
it, and a turn that sends one to it is refused before the lease.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import secrets
from contextvars import ContextVar, Token
from urllib.parse import unquote, unquote_to_bytes, urlsplit

import attrs

from turnstate.core._media_hints import (
    first_bytes,
    missing_type_hint,
    text_hint,
    wrong_part_hint,
)
from turnstate.core._text import fetched_host

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image media types every vision provider of the registry takes."""

PDF = "application/pdf"
FILE_TYPES = frozenset({PDF})
"""The file media types a ``FilePart`` may carry (PDF only)."""

MAX_URL_CHARS = 8_192
MAX_FILENAME_CHARS = 255


def _bytes_repr(data: bytes | None) -> str:
    return "None" if data is None else f"<{len(data):,} bytes>"


@attrs.frozen(kw_only=True)
class ImagePart:
    """An image the user attached: inline ``data`` with its ``media_type``
    (``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp``), or an https
    ``url`` (``media_type`` optional then). Stored with the user message (inline bytes
    as base64 in the JSON)."""

    media_type: str | None = None
    data: bytes | None = attrs.field(default=None, repr=_bytes_repr)
    url: str | None = None
    filename: str | None = None
    """The name the user's file had (a front end's ``FileUIPart.filename``): stored and
    shown with the image, never sent to a provider."""


@attrs.frozen(kw_only=True)
class FilePart:
    """A PDF the user attached: inline ``data`` or an https ``url``, with an optional
    ``filename`` (sent where the wire has one)."""

    media_type: str = PDF
    data: bytes | None = attrs.field(default=None, repr=_bytes_repr)
    url: str | None = None
    filename: str | None = None


MediaPart = ImagePart | FilePart


@attrs.frozen(kw_only=True)
class MediaRef:
    """An image or PDF of a stored message as a store's lean read gives it
    (``Store.load_messages_lean``): what a view shows, never the bytes.

    Not a ``Part``: no codec takes one and no store writes one (``LeanPartRefused``),
    so a message read this way cannot be replayed to a provider or committed back.
    """

    kind: str
    """The stored part's tag: ``image`` or ``file``."""
    media_type: str | None
    size: int | None
    """How many inline bytes the part holds; None for a URL part."""
    tokens: int
    """Its provider-neutral token estimate, as stored when it was written."""
    url: str | None = None
    filename: str | None = None


def kind_of(part: MediaPart) -> str:
    """The registry's input type of ``part``: ``image`` or ``file``
    (``ModelInfo.inputs`` holds these names)."""
    return "image" if isinstance(part, ImagePart) else "file"


def inline_bytes(part: MediaPart) -> int:
    """How many inline bytes ``part`` carries (0 for a URL)."""
    return len(part.data) if part.data is not None else 0


def part_problem(part: MediaPart) -> tuple[str, str] | None:
    """The (field, problem) that makes ``part`` unusable, or None.

    Exactly one of ``data`` and ``url``; ``data`` non-empty bytes with a known media
    type; ``url`` an https URL with a host; a known media type whenever one is given.
    """
    allowed = IMAGE_TYPES if isinstance(part, ImagePart) else FILE_TYPES
    if (part.data is None) == (part.url is None):
        return "data", "give exactly one of data (inline bytes) and url"
    if part.data is not None:
        if not isinstance(part.data, bytes) or not part.data:
            return "data", "must be non-empty bytes"
        if part.media_type is None:
            return "media_type", (f"inline data needs a media type, one of {sorted(allowed)}"
                                  f"{missing_type_hint(sniffed_type(part.data))}")
    elif (problem := url_problem(part.url)) is not None:
        return "url", problem
    if part.media_type is not None and part.media_type not in allowed:
        return "media_type", (f"{part.media_type!r} is not one of {sorted(allowed)}"
                              f"{wrong_part_hint(kind_of(part), str(part.media_type))}")
    if part.filename is not None:
        name = part.filename
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_FILENAME_CHARS \
                or not name.isprintable():
            return "filename", f"must be printable text of 1 to {MAX_FILENAME_CHARS} characters"
    return None if part.data is None else _bytes_problem(part.data, part.media_type)


_SIGNATURES = (("image/png", b"\x89PNG"), ("image/jpeg", b"\xff\xd8\xff"),
               ("image/gif", b"GIF87a"), ("image/gif", b"GIF89a"), (PDF, b"%PDF"))
"""How each type's bytes start (WebP, ``RIFF....WEBP``, is read apart)."""


def sniffed_type(data: bytes) -> str | None:
    """The media type ``data`` starts like, from its first bytes; None when it is none of
    ``IMAGE_TYPES`` and PDF."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    found = next((kind for kind, head in _SIGNATURES if data.startswith(head)), None)
    if found is None and b"%PDF-" in data[:1024]:  # a header after a BOM or a mail
        return PDF  # header: PDF readers look for it in the first 1,024 bytes
    return found


def _bytes_problem(data: bytes, media_type: str | None) -> tuple[str, str] | None:
    """Whether inline ``data`` is what ``media_type`` says. Stored with the message and
    replayed with the history, bytes a provider cannot decode (or that Anthropic finds
    of another type than declared) failed that turn and every later replay of the chat
    with an HTTP 400."""
    found = sniffed_type(data)
    if found is None:
        hint = text_hint(data)
        return "data", (f"is not an {media_type} (its first bytes are {first_bytes(data)}: "
                        f"none of PNG, JPEG, GIF, WebP or PDF){hint}")
    if found != media_type:
        return "media_type", f"is {media_type!r} but the bytes are an {found}"
    return None


def is_data_url(url: object) -> bool:
    """Whether ``url`` is a ``data:`` URL (a browser's ``FileReader.readAsDataURL``),
    which ``TurnInput`` takes as the inline bytes it carries (``split_data_url``)."""
    return isinstance(url, str) and url[:5].lower() == "data:"


def split_data_url(url: str) -> tuple[str | None, bytes] | str:
    """``(media_type, data)`` of a ``data:[<type>][;param...][;base64],<data>`` URL
    (RFC 2397; the type lowercased, its parameters dropped, None when absent), or the
    problem with it."""
    comma = url.find(",", 5)
    if comma < 0:
        return "is a data: URL without its comma (data:<type>;base64,<data>)"
    head, body = url[5:comma], url[comma + 1:]  # one copy of the data, not two
    params = [p.strip() for p in head.split(";")]
    media_type = params[0].lower() or None
    if params[-1].lower() == "base64":
        try:  # ``decoded_base64``: no ASCII copy of the text first
            data = decoded_base64("".join(unquote(body).split()))
        except ValueError:
            return "is a data: URL whose data is not base64"
    else:
        data = unquote_to_bytes(body)
    return media_type, data


def url_problem(url: object) -> str | None:
    """Why ``url`` is not an https URL a provider could fetch, or None."""
    if not isinstance(url, str) or len(url) > MAX_URL_CHARS or not url.isprintable() \
            or " " in url:
        return f"must be an https URL of at most {MAX_URL_CHARS} printable characters"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a URL"
    if parts.scheme != "https" or not parts.hostname:
        return "must be an https URL with a host"
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials (user:password@)"
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
    except ValueError:
        return "has a port that is no number from 0 to 65535"
    return _internal_host(parts.hostname)


def _internal_host(host: str) -> str | None:
    """Why ``host`` is not one a fetcher should be sent to, or None: ``localhost``, or
    an address literal that is not a global one (loopback, private, link-local such as
    the cloud metadata address, reserved), or a number a fetcher may read as an address
    (``2130706433``, ``0x7f.1``, ``0177.0.0.1``: no top-level domain is numeric).
    The host is read as a fetcher reads it (``fetched_host``): ``ｌｏｃａｌｈｏｓｔ`` or
    ``127。0。0。1`` fold to the ASCII names refused here (attack10)."""
    folded = fetched_host(host)
    if folded is None:
        return "has a host name that IDNA cannot write in ASCII (no fetcher could ask for it)"
    name = folded.rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return "must not name this machine (localhost)"
    last = name.rsplit(".", 1)[-1]
    if ":" not in name and not (last.isdigit() or last.startswith("0x")):
        return None  # a domain name: what it resolves to is the fetcher's to check
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return "must name its host by a domain or a canonical IP address"
    mapped = getattr(address, "ipv4_mapped", None)
    if not (mapped or address).is_global:
        return "must not name a private, loopback, link-local or reserved address"
    return None


def decoded_base64(text: str) -> bytes:
    """Standard base64 ``text`` as bytes, strictly (``base64.b64decode(text,
    validate=True)``): ``binascii.Error`` for bad base64, ``ValueError`` for a
    non-ASCII character. Decoded from the text itself: ``b64decode`` first copies a
    ``str`` into ASCII bytes, a third copy of a turn's image beside its text and its
    bytes (memory7)."""
    return binascii.a2b_base64(text, strict_mode=True)


def base64_text(data: bytes) -> str:
    """``data`` as standard base64 text (what every wire and the store carry); inside
    ``deferred_media``, a short mark the request's bytes get the base64 in place of."""
    deferred = _DEFERRED.get()
    if deferred is not None:
        return deferred.mark(data)
    return base64.b64encode(data).decode("ascii")


class DeferredMedia:
    """The inline media of one request body being written (``deferred_media``): the
    payload carries a mark per image or file, and ``spliced`` puts each one's base64
    into the body's bytes once. Written into the payload, a 20 MiB image's 26.7 MiB of
    base64 was held as the payload's text, the JSON encoder's quoted copy, the body's
    text and its bytes: 5x the image at the request's peak; spliced, the base64 is made
    once, as bytes, beside the body (3.7x; memory7). A context manager: within it,
    ``base64_text`` gives its marks. A request without media (a cursor turn) pays the
    context variable's set and reset alone: the nonce is drawn at the first mark."""

    __slots__ = ("_marks", "_reset", "data", "nonce")

    def __init__(self) -> None:
        self.nonce = ""
        self.data: list[bytes] = []
        self._reset: Token[DeferredMedia | None] | None = None
        self._marks: re.Pattern[str] | None = None  # with the nonce: what ``mark`` writes

    def __enter__(self) -> DeferredMedia:
        self._reset = _DEFERRED.set(self)
        return self

    def __exit__(self, *_: object) -> None:
        if self._reset is not None:
            _DEFERRED.reset(self._reset)
            self._reset = None

    def mark(self, data: bytes) -> str:
        """A mark for ``data``: ASCII letters and digits, which JSON writes as they are,
        and a random nonce no text of the request can know."""
        if not self.nonce:
            self.nonce = secrets.token_hex(8)
            self._marks = re.compile(f"tsmedia{self.nonce}n([0-9]+)z")
        self.data.append(data)
        return f"tsmedia{self.nonce}n{len(self.data) - 1}z"

    def grown(self, text: str, end: int | None = None) -> int:
        """How many characters longer ``text[:end]`` is with its marks replaced by their
        media's base64: a codec that counts the characters of what it wrote (Anthropic's
        cache breakpoints) counts those of the body sent (memory8). Nothing is copied."""
        if self._marks is None:
            return 0
        return sum(4 * ((len(self.data[int(found.group(1))]) + 2) // 3) - len(found.group())
                   for found in self._marks.finditer(text, 0, len(text) if end is None else end))

    def spliced(self, body: bytes) -> bytes:
        """``body`` (the UTF-8 JSON written with marks) with each mark replaced by its
        media's base64."""
        if self._marks is None:
            return body
        pieces: list[bytes] = []
        start = 0
        for found in re.finditer(self._marks.pattern.encode(), body):  # the marks, as bytes
            pieces += (body[start:found.start()],
                       base64.b64encode(self.data[int(found.group(1))]))
            start = found.end()
        pieces.append(body[start:])
        return b"".join(pieces)


_DEFERRED: ContextVar[DeferredMedia | None] = ContextVar("turnstate_deferred_media",
                                                         default=None)


def deferred_media() -> DeferredMedia:
    """Within it (``with deferred_media() as media``), ``base64_text`` gives marks that
    ``media.spliced`` replaces: a codec writes its request body inside it and splices the
    bytes (sans-IO, synchronous: the context is the caller's alone)."""
    return DeferredMedia()


def data_url(media_type: str, data: bytes) -> str:
    """``data:image/png;base64,...``: the inline form OpenAI's wires take."""
    return f"data:{media_type};base64,{base64_text(data)}"


def describe(part: MediaPart) -> str:
    """A short description: ``an image/png of 1,024 bytes``, ``an image at https://...``,
    ``an application/pdf of 2,048 bytes`` (the emulators echo it, tests compare it)."""
    if part.data is not None:
        return f"an {part.media_type} of {len(part.data):,} bytes"
    noun = "an image" if isinstance(part, ImagePart) else "a document"
    return f"{noun} at {part.url}"


def omitted_text(part: MediaPart) -> str:
    """The text sent in place of ``part`` to a model that does not take its type:
    ``[image omitted: image/png, 1,024 bytes]`` or ``[file omitted: https://...]``."""
    what = kind_of(part)
    if part.data is not None:
        return f"[{what} omitted: {part.media_type}, {len(part.data):,} bytes]"
    return f"[{what} omitted: {part.url}]"
