"""serve's admission (server/admission.py): one request per session family, a bounded
queue, and one token's share of the workers; waiting holds no thread."""

from __future__ import annotations

import asyncio

import pytest

from koogcli.server.admission import Admission
from koogcli.server.errors import Refused


def test_one_request_per_family_and_the_queue_bound_is_409_at_once() -> None:
    async def go() -> None:
        admission = Admission(queue=1, wait_seconds=5, share=32, by_token=False)
        first = await admission.enter("work", "-")
        waiting = asyncio.ensure_future(admission.enter("work", "-"))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        with pytest.raises(Refused) as busy:
            await admission.enter("work", "-")  # the queue holds one already
        assert busy.value.status == 409
        other = await asyncio.wait_for(admission.enter("other", "-"), 0.1)
        first()
        second = await asyncio.wait_for(waiting, 1)
        second()
        other()

    asyncio.run(go())


def test_a_wait_past_the_bound_is_409() -> None:
    async def go() -> None:
        admission = Admission(queue=5, wait_seconds=0.05, share=32, by_token=False)
        held = await admission.enter("work", "-")
        with pytest.raises(Refused, match="stayed busy"):
            await admission.enter("work", "-")
        held()
        (await admission.enter("work", "-"))()

    asyncio.run(go())


def test_one_token_holds_its_share_and_another_token_is_not_held_up() -> None:
    async def go() -> None:
        admission = Admission(queue=5, wait_seconds=5, share=2, by_token=True)
        a1 = await admission.enter("a1", "alice")
        a2 = await admission.enter("a2", "alice")
        third = asyncio.ensure_future(admission.enter("a3", "alice"))
        await asyncio.sleep(0.01)
        assert not third.done()  # alice holds her two workers
        bob = await asyncio.wait_for(admission.enter("b1", "bob"), 0.1)
        a1()
        (await asyncio.wait_for(third, 1))()
        a2()
        bob()

    asyncio.run(go())


def test_without_tokens_stateless_requests_hold_their_share_and_sessions_are_not_held_up() -> None:
    """Issue 45: a burst of requests naming no session is one client of the share rule,
    so a session's request still finds a worker."""

    async def go() -> None:
        admission = Admission(queue=5, wait_seconds=5, share=2, by_token=False)
        s1 = await admission.enter(None, "-")
        s2 = await admission.enter(None, "-")
        third = asyncio.ensure_future(admission.enter(None, "-"))
        await asyncio.sleep(0.01)
        assert not third.done()  # the stateless requests hold their two workers
        work = await asyncio.wait_for(admission.enter("work", "-"), 0.1)
        other = await asyncio.wait_for(admission.enter("other", "-"), 0.1)
        s1()
        (await asyncio.wait_for(third, 1))()
        s2()
        work()
        other()

    asyncio.run(go())
