"""hermes_client against a live `hermes serve` on nats-server; every envelope sent and
received is checked against `schema/<kind>.json`."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from hermes_client import InvalidId, ToolFailure, connect, events


def run(coro):
    return asyncio.run(coro)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_a_turn_answers_and_every_envelope_matches_the_schema(deployment, schemas):
    async def main():
        hermes = await connect(deployment, observer=schemas.validate)
        async with await hermes.session("assistant", unique("s"), user="u-1") as chat:
            turn = await chat.turn("hello there", timeout=60)
        await hermes.close()
        return turn

    turn = run(main())
    assert turn.answer == "ok", turn
    assert isinstance(turn.events[0], events.TurnStarted)
    assert isinstance(turn.events[-1], events.Answer)
    kinds = {kind for _, kind in schemas.checked}
    # The turn's events arrive together (`turn.events`); the extractor's `memory.written`
    # comes alone (`turn.event`).
    assert {"user.message", "accepted", "turn.events"} <= kinds, schemas.checked


def test_a_python_worker_serves_the_tool_the_model_calls(deployment, schemas):
    seen = []

    def word_count(arguments):
        seen.append(arguments)
        return {"words": len(arguments["text"].split())}

    async def main():
        hermes = await connect(deployment, observer=schemas.validate)
        worker = await hermes.serve_tool("word_count", word_count)
        async with await hermes.session("assistant", unique("w"), user="u-2") as chat:
            turn = await chat.turn("please count my words", timeout=60)
        await worker.stop()
        await hermes.close()
        return turn

    turn = run(main())
    assert turn.answer == "The worker counted the words.", turn
    results = [e for e in turn.events if isinstance(e, events.ToolResult)]
    assert results and results[0].ok and results[0].result["output"] == {"words": 3}, turn
    assert seen == [{"text": "one two three"}]
    assert ("received", "tool.call") in schemas.checked
    assert ("sent", "tool.result") in schemas.checked


def test_a_tool_failure_reaches_the_model_as_a_structured_error(deployment, schemas):
    def broken(arguments):
        raise ToolFailure("invalid_arguments", "text is too short", "send a longer text")

    async def main():
        hermes = await connect(deployment, observer=schemas.validate)
        worker = await hermes.serve_tool("word_count", broken)
        async with await hermes.session("assistant", unique("f"), user="u-2") as chat:
            turn = await chat.turn("count this", timeout=60)
        await worker.stop()
        await hermes.close()
        return turn

    turn = run(main())
    results = [e for e in turn.events if isinstance(e, events.ToolResult)]
    assert results and not results[0].ok, turn
    assert results[0].result["error"]["code"] == "invalid_arguments"
    assert results[0].result["error"]["message"] == "text is too short"


def test_a_high_risk_call_waits_for_confirmation_and_runs_once_approved(deployment, schemas):
    calls = []

    async def main():
        hermes = await connect(deployment, observer=schemas.validate)
        worker = await hermes.serve_tool("archive_note",
                                         lambda a: calls.append(a) or {"archived": a["note"]})
        async with await hermes.session("assistant", unique("c"), user="u-3") as chat:
            paused = await chat.turn("archive my note", timeout=60)
            assert paused.needs_confirmation is not None, paused
            assert paused.needs_confirmation.name == "archive_note"
            assert calls == [], "nothing runs before the user says yes"
            done = await chat.confirm_and_follow(True, paused.needs_confirmation.call_id,
                                                 timeout=60)
        await worker.stop()
        await hermes.close()
        return done

    done = run(main())
    assert done.answer == "The note is archived.", done
    assert calls == [{"note": "n-1"}]
    assert ("sent", "user.confirmation") in schemas.checked
    assert ("received", "confirmation.accepted") in schemas.checked


def test_a_published_event_reaches_its_trigger_and_the_answer_comes_back(deployment, schemas):
    ticket = unique("T")

    async def main():
        hermes = await connect(deployment, observer=schemas.validate)
        reply = await hermes.publish_and_wait(
            f"crm.tickets.{ticket}.opened",
            {"event_id": unique("evt"), "customer": "u-7", "summary": "printer on fire"},
            f"crm.tickets.{ticket}.reply", timeout=60)
        await hermes.close()
        return reply

    reply = run(main())
    assert reply.text == "Ticket received: we are on it.", reply
    assert reply.session == f"ticket-{ticket}"


def test_a_memory_written_is_listed_recalled_and_forgotten(deployment, schemas):
    user = unique("m")

    async def main():
        hermes = await connect(deployment, observer=schemas.validate)
        memory = hermes.memory(user)
        written = await memory.write("favourite_editor", "The user writes code in Helix.",
                                     kind="preference", importance=0.8)
        listed = await memory.list()
        recalled = await memory.recall("which editor does the user use")
        forgotten = await memory.forget(key="favourite_editor")
        after = await memory.list()
        await hermes.close()
        return written, listed, recalled, forgotten, after

    written, listed, recalled, forgotten, after = run(main())
    assert written and written[0]["key"] == "favourite_editor", written
    assert [m.key for m in listed] == ["favourite_editor"]
    assert recalled and "Helix" in recalled[0].memory.content
    assert forgotten and forgotten[0]["key"] == "favourite_editor"
    assert after == []


def test_an_id_that_cannot_be_a_subject_token_is_refused_before_sending(deployment):
    async def main():
        hermes = await connect(deployment)
        try:
            with pytest.raises(InvalidId, match="session"):
                await hermes.session("assistant", "bad.session", user="u-1")
            with pytest.raises(InvalidId, match="user"):
                hermes.memory("u 1")
        finally:
            await hermes.close()

    run(main())
