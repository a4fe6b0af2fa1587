"""``emulators._chain`` against the flat list it replaces: a conversation grown step by
step as a chain of nodes reads, pairs, names calls, finds earlier media and hashes its
prompt-cache prefix exactly as the whole list does (issue 25, defect 14)."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from turnstate.emulators._base import Item, append_item, pairing_problem
from turnstate.emulators._chain import ChainBuilder, ChainNode, ChainView, prefix_of
from turnstate.emulators._prompt_cache import extend_prefix
from turnstate.emulators._responses import item_unit

CALL_IDS = ("c1", "c2", "c3")

items = st.one_of(
    st.builds(Item, kind=st.just("user"), text=st.sampled_from(("hi", "more")),
              media=st.sampled_from(((), ("an image/png of 3 bytes",)))),
    st.builds(Item, kind=st.just("assistant"), text=st.sampled_from(("a", "b"))),
    st.builds(Item, kind=st.just("tool_call"), call_id=st.sampled_from(CALL_IDS),
              name=st.sampled_from(("weather", "time")), text=st.just("{}")),
    st.builds(Item, kind=st.just("tool_result"), call_id=st.sampled_from(CALL_IDS),
              text=st.just("ok")),
)
steps = st.lists(st.lists(items, min_size=1, max_size=4), min_size=1, max_size=6)


def flat_name(flat: list[Item], call_id: str) -> str:
    names = {it.call_id: it.name for it in flat if it.kind == "tool_call"}
    return names.get(call_id, "")


@given(steps)
def test_a_chain_reads_pairs_and_names_like_the_flat_list(chunks: list[list[Item]]) -> None:
    # Providers never reuse a call id; with a reused one the flat check let one output
    # answer both calls, the chain asks each call for an output after it.
    calls = [i.call_id for chunk in chunks for i in chunk if i.kind == "tool_call"]
    assume(len(calls) == len(set(calls)))
    flat: list[Item] = []
    node: ChainNode | None = None
    for chunk in chunks:
        builder = ChainBuilder(node)
        for item in chunk:
            if item.kind == "tool_result":
                assert builder.name_of(item.call_id) == flat_name(flat, item.call_id)
            builder.append(item)
            append_item(flat, item)
        # Pairing is only asked of a chain whose earlier steps passed it (the emulators
        # refuse a request that does not pair, and store nothing).
        assert builder.pairing_problem() == pairing_problem(flat)
        if pairing_problem(flat) is not None:
            return
        node = builder.node()
        view = ChainView(node)
        assert (len(view), list(view), list(reversed(view))) == (
            len(flat), flat, flat[::-1])
        for start in range(len(flat) + 1):
            assert list(view[start:]) == flat[start:]
            assert view.user_media_before(start) == [
                m for it in flat[:start] if it.kind == "user" for m in it.media]
        assert view[-1] == flat[-1] and view[0] == flat[0]
        tip = prefix_of(node, "fixed", item_unit)
        assert tip.digest == extend_prefix(None, ["fixed", *map(item_unit, flat)]).digest
