"""User content parts (issue 23 item 2): the checks a part passes, the shorthand rules of
``TurnInput``, the inline-bytes bound, the capability check, the placeholder, and the
token estimate by each provider's documented image rule."""

from __future__ import annotations

import struct

import attrs
import pytest

from turnstate.core import DEFAULT_REGISTRY, FilePart, ImagePart, InvalidInput, TextPart
from turnstate.core._content import capability_problem, for_model, inline_problem
from turnstate.core._context import CHARS_PER_TOKEN, part_chars
from turnstate.core._media import describe, omitted_text, part_problem
from turnstate.core._media_tokens import image_size, image_tokens, media_tokens, pdf_pages
from turnstate.engine import TurnInput, TurnLimits
from turnstate.engine._limits import check_input


def png(width: int, height: int, size: int = 100) -> bytes:
    head = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width,
                                                                                height)
    return head + b"\0" * max(0, size - len(head))


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0" + b"\0" * 9
    sof0 = b"\xff\xc0" + struct.pack(">HBHH", 17, 8, height, width) + b"\0" * 10
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def turn(**fields: object) -> TurnInput:
    return TurnInput(provider="openai", model="gpt-4o", system_prompt="", **fields)  # type: ignore[arg-type]


IMAGE = ImagePart(media_type="image/png", data=png(10, 10))


# --- the parts and TurnInput ------------------------------------------------------------


@pytest.mark.parametrize(("part", "field", "words"), [
    (ImagePart(url="http://example.com/a.png"), "url", "https URL"),
    (ImagePart(url="https:///nohost"), "url", "https URL with a host"),
    (ImagePart(url="https://a.example/x y.png"), "url", "printable"),
    (ImagePart(media_type="image/png", data=b""), "data", "non-empty"),
    (ImagePart(data=b"x"), "media_type", "needs a media type"),
    (ImagePart(media_type="image/bmp", data=b"x"), "media_type", "'image/bmp'"),
    (ImagePart(media_type="image/png", data=b"x", url="https://a.example/b"), "data",
     "exactly one"),
    (ImagePart(), "data", "exactly one"),
    (FilePart(media_type="text/plain", data=b"x"), "media_type", "'text/plain'"),
    (FilePart(data=b"%PDF", filename=""), "filename", "printable"),
    (FilePart(data=b"%PDF", filename="a\nb.pdf"), "filename", "printable"),
    (ImagePart(media_type="image/png", data=b"x", filename=" "), "filename", "printable"),
])
def test_a_bad_part_is_refused_naming_its_index_and_field(
    part: ImagePart | FilePart, field: str, words: str,
) -> None:
    assert part_problem(part) is not None
    with pytest.raises(InvalidInput) as refused:
        turn(content=(TextPart(text="hi"), part))
    assert refused.value.field == f"content[1].{field}"
    assert words in refused.value.problem


def test_good_parts_pass() -> None:
    for part in (IMAGE, ImagePart(url="https://a.example/b.jpg"),
                 ImagePart(media_type="image/webp", url="https://a.example/b"),
                 FilePart(data=b"%PDF", filename="report.pdf"),
                 ImagePart(url="https://a.example/b.png", filename="b.png"),
                 FilePart(url="https://a.example/p.pdf")):
        assert part_problem(part) is None


def test_content_or_user_text_exactly_one() -> None:
    with pytest.raises(InvalidInput, match="neither was given"):
        turn()
    with pytest.raises(InvalidInput, match="not both"):
        turn(user_text="hi", content=(IMAGE,))
    with pytest.raises(InvalidInput) as refused:
        turn(content=("hi",))
    assert refused.value.field == "content[0]"
    assert turn(user_text="").user_parts == (TextPart(text=""),)  # built; the engine refuses it


def test_user_text_reads_as_the_contents_text_and_evolve_keeps_working() -> None:
    request = turn(content=[TextPart(text="a"), IMAGE, TextPart(text="b")])
    assert request.content == (TextPart(text="a"), IMAGE, TextPart(text="b"))
    assert request.user_text == "ab"
    assert request.user_parts == request.content
    again = attrs.evolve(request, turn_id="t2")
    assert again.content == request.content and again.user_text == "ab"
    assert turn(user_text="hi").user_parts == (TextPart(text="hi"),)


def test_inline_bytes_are_bounded_per_turn_and_urls_do_not_count() -> None:
    big = ImagePart(media_type="image/png", data=b"\x89PNG" + b"x" * 596)
    check_input(turn(content=(big, ImagePart(url="https://a.example/b"))),
                TurnLimits(max_inline_bytes=1_000))
    with pytest.raises(InvalidInput) as refused:
        check_input(turn(content=(big, FilePart(data=b"%PDF" + b"y" * 596))),
                    TurnLimits(max_inline_bytes=1_000))
    assert refused.value.field == "content"
    assert "1,200 bytes" in refused.value.problem and "1,000" in refused.value.problem
    assert TurnLimits().max_inline_bytes == 20 * 1024 * 1024
    assert inline_problem((big,), 600) is None


def test_a_model_refuses_a_part_type_it_does_not_take() -> None:
    deepseek = DEFAULT_REGISTRY.model("deepseek", "deepseek-v4-flash")
    mini = attrs.evolve(DEFAULT_REGISTRY.model("openai-compatible", "gpt-4o-mini"),
                        inputs=frozenset({"image"}))  # a server taking images alone
    claude = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
    pdf = FilePart(data=b"%PDF")
    assert capability_problem((TextPart(text="x"), IMAGE), deepseek) == (
        "content[1]", "deepseek model 'deepseek-v4-flash' does not take image input")
    assert capability_problem((IMAGE, pdf), mini) == (
        "content[1]", "openai-compatible model 'gpt-4o-mini' does not take file input")
    assert capability_problem((IMAGE, pdf), claude) is None


def test_replay_to_a_model_without_the_input_type_gets_a_placeholder() -> None:
    deepseek = DEFAULT_REGISTRY.model("deepseek", "deepseek-v4-flash")
    data = ImagePart(media_type="image/png", data=b"\x89PNG" + b"x" * 1_020)  # a PNG (embed7)
    url = FilePart(url="https://a.example/p.pdf")
    assert for_model((TextPart(text="see"), data, url), deepseek) == (
        TextPart(text="see"), TextPart(text="\n[image omitted: image/png, 1,024 bytes]\n"),
        TextPart(text="\n[file omitted: https://a.example/p.pdf]"))
    claude = DEFAULT_REGISTRY.model("anthropic", "claude-sonnet-4-5")
    assert for_model((data, url), claude) == (data, url)
    assert omitted_text(data) == "[image omitted: image/png, 1,024 bytes]"
    assert describe(data) == "an image/png of 1,024 bytes"
    assert describe(ImagePart(url="https://a.example/b")) == "an image at https://a.example/b"
    assert describe(url) == "a document at https://a.example/p.pdf"


# --- the token estimate ------------------------------------------------------------------


def test_image_sizes_are_read_from_the_headers() -> None:
    assert image_size(png(640, 480)) == (640, 480)
    assert image_size(b"GIF89a" + struct.pack("<HH", 33, 44) + b"\0" * 8) == (33, 44)
    assert image_size(jpeg(800, 600)) == (800, 600)
    vp8x = b"RIFF\0\0\0\0WEBPVP8X" + b"\0" * 8 + (99).to_bytes(3, "little") \
        + (199).to_bytes(3, "little")
    assert image_size(vp8x) == (100, 200)
    vp8l = b"RIFF\0\0\0\0WEBPVP8L" + b"\0" * 5 + (9 | (19 << 14)).to_bytes(4, "little")
    assert image_size(vp8l) == (10, 20)
    assert image_size(b"not an image") is None
    assert image_size(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0") is None  # cut short


@pytest.mark.parametrize(("family", "width", "height", "tokens"), [
    ("anthropic", 1_000, 1_000, 1_334),        # w*h/750
    ("anthropic", 200, 200, 54),
    ("anthropic", 4_000, 4_000, 1_534),        # scaled to ~1.15 MP first
    ("openai", 1_024, 1_024, 765),             # 768 x 768: 4 tiles
    ("openai", 2_048, 4_096, 1_105),           # fit 2,048, short side 768: 6 tiles
    ("openai", 512, 512, 255),
    ("gemini", 384, 384, 258),
    ("gemini", 1_000, 1_000, 1_032),           # 2 x 2 tiles of 768
])
def test_image_tokens_follow_each_providers_documented_rule(
    family: str, width: int, height: int, tokens: int,
) -> None:
    assert image_tokens(width, height, family) == tokens


def test_media_tokens_by_provider_and_flat_figures_when_the_size_is_unknown() -> None:
    square = ImagePart(media_type="image/png", data=png(1_000, 1_000))
    assert media_tokens(square, "anthropic") == 1_334
    assert media_tokens(square, "openai-compatible") == media_tokens(square, "openai") == 765
    assert media_tokens(square, "gemini") == 1_032
    assert media_tokens(square) == 1_334  # the neutral rule is Anthropic's
    url = ImagePart(url="https://a.example/b.png")
    assert media_tokens(url, "anthropic") == 1_600  # Anthropic's documented ceiling
    assert media_tokens(ImagePart(media_type="image/png", data=b"junk"), "anthropic") == 1_600
    assert media_tokens(url, "openai") == 765  # 1,024 x 1,024
    assert media_tokens(url, "gemini") == 1_032
    three = b"%PDF " + b"/Type /Page " * 3 + b"/Type /Pages"
    assert pdf_pages(three) == 3
    assert media_tokens(FilePart(data=three), "gemini") == 3 * 258
    assert media_tokens(FilePart(data=three), "anthropic") == 3 * 3_000
    assert media_tokens(FilePart(url="https://a.example/p.pdf"), "gemini") == 5 * 258
    assert media_tokens(FilePart(data=b"%PDF compressed"), "gemini") == 258  # one page


def test_the_context_estimate_counts_an_image_by_its_tokens_not_its_bytes() -> None:
    big = ImagePart(media_type="image/png", data=png(1_000, 1_000, size=2_000_000))
    assert part_chars((TextPart(text="abcd"), big)) == 4 + 1_334 * CHARS_PER_TOKEN


def test_the_stored_media_tags_are_the_part_tags() -> None:
    from turnstate.core._conversation import PART_TAGS
    from turnstate.storage._media_json import MEDIA_TAGS

    assert {PART_TAGS[ImagePart], PART_TAGS[FilePart]} == MEDIA_TAGS


def test_a_stored_media_part_with_bad_base64_or_tokens_is_unreadable() -> None:
    from turnstate.core import StorageError
    from turnstate.storage._commit_columns import stored_chars
    from turnstate.storage._records import decode_parts, encode_parts

    text = encode_parts((IMAGE,))
    assert decode_parts(text) == (IMAGE,) and '"tokens":' in text
    with pytest.raises(StorageError):
        decode_parts('[{"type":"image","mediaType":"image/png","data":"!!","tokens":1}]')
    for tokens in ("", ',"tokens":-1', ',"tokens":"9"'):
        with pytest.raises(StorageError):
            stored_chars(f'[{{"type":"image","mediaType":"image/png","data":"AA=="{tokens}}}]')
