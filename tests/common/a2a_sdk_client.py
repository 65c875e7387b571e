"""Drives a Hermes A2A server with the official A2A Python SDK's client (a2a-sdk 1.3.0).

    python a2a_sdk_client.py URL BINDING SCENARIO [--token T] [--task ID] [--context C]

URL is the agent's base URL (its card is at URL/.well-known/agent-card.json), BINDING is
JSONRPC or HTTP+JSON. Each scenario prints one JSON object on stdout: what it saw, for the
Rust test to check (tests/suite/a2a_server.rs). Progress goes to stderr.
"""

import argparse
import asyncio
import http.server
import json
import sys
import threading
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from a2a.helpers.proto_helpers import new_text_message
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Role,
    SendMessageRequest,
    SendMessageConfiguration,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def state_name(state):
    return TaskState.Name(state)


def answer_of(task):
    texts = [p.text for a in task.artifacts for p in a.parts if p.text]
    return "\n".join(texts)


def user_message(text, context_id=None, task_id=None, message_id=None):
    m = new_text_message(text, context_id=context_id, task_id=task_id, role=Role.ROLE_USER)
    if message_id:
        m.message_id = message_id
    return m


class Driver:
    def __init__(self, args):
        self.args = args
        headers = {}
        if args.token:
            headers["Authorization"] = f"Bearer {args.token}"
        self.http = httpx.AsyncClient(headers=headers, timeout=60)
        self.card = None

    async def client(self, streaming=False, polling=False):
        if self.card is None:
            resolver = A2ACardResolver(self.http, self.args.url)
            self.card = await resolver.get_agent_card()
        config = ClientConfig(
            streaming=streaming,
            polling=polling,
            httpx_client=self.http,
            supported_protocol_bindings=[self.args.binding],
        )
        return ClientFactory(config).create(self.card)

    async def send(self, text, streaming=False, polling=False, **kw):
        """(last task, every StreamResponse as a dict)."""
        client = await self.client(streaming=streaming, polling=polling)
        request = SendMessageRequest(message=user_message(text, **kw))
        return await self.collect(client.send_message(request))

    async def collect(self, stream):
        events, task = [], None
        async for event in stream:
            d = MessageToDict(event)
            events.append(d)
            log("event", json.dumps(d)[:300])
            if event.HasField("task"):
                task = event.task
        return task, events


def kinds(events):
    out = []
    for e in events:
        if "task" in e:
            out.append(("task", e["task"]["status"]["state"]))
        elif "statusUpdate" in e:
            out.append(("status", e["statusUpdate"]["status"]["state"]))
        elif "artifactUpdate" in e:
            text = "".join(p.get("text", "") for p in e["artifactUpdate"]["artifact"]["parts"])
            out.append(("artifact", text))
        elif "message" in e:
            out.append(("message", ""))
    return out


async def card(d):
    c = MessageToDict(await A2ACardResolver(d.http, d.args.url).get_agent_card())
    return c


async def send(d):
    """Blocking send, get, a retry of the same messageId, list by context."""
    message_id = str(uuid.uuid4())
    task, _ = await d.send("what is the sum?", message_id=message_id)
    client = await d.client()
    got = await client.get_task(GetTaskRequest(id=task.id, history_length=10))
    again, _ = await d.send("what is the sum?", message_id=message_id,
                            context_id=task.context_id)
    listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
    second, _ = await d.send("hello again", context_id=task.context_id)
    listed_all = await client.list_tasks(ListTasksRequest(context_id=task.context_id,
                                                         include_artifacts=True))
    missing = None
    try:
        await client.get_task(GetTaskRequest(id=task.context_id + ".nope"))
    except Exception as e:  # the SDK's TaskNotFoundError
        missing = type(e).__name__
    return {
        "task_id": task.id,
        "context_id": task.context_id,
        "state": state_name(task.status.state),
        "answer": answer_of(task),
        "got_state": state_name(got.status.state),
        "got_history": [
            {"role": Role.Name(m.role), "text": m.parts[0].text} for m in got.history
        ],
        "retry_task_id": again.id,
        "listed": [t.id for t in listed.tasks],
        "listed_total": listed.total_size,
        "second_task_id": second.id,
        "second_context_id": second.context_id,
        "listed_all": [(t.id, state_name(t.status.state), answer_of(t)) for t in listed_all.tasks],
        "missing_error": missing,
    }


async def stream(d):
    task, events = await d.send("what is the sum?", streaming=True)
    return {"task_id": task.id if task else None, "events": kinds(events)}


async def long_task(d):
    """A non-blocking send of a slow task, then SubscribeToTask until it ends."""
    task, _ = await d.send("write the report", polling=True)
    first = state_name(task.status.state)
    client = await d.client(streaming=True)
    _, events = await d.collect(client.subscribe(SubscribeToTaskRequest(id=task.id)))
    final = await client.get_task(GetTaskRequest(id=task.id))
    return {
        "task_id": task.id,
        "first_state": first,
        "events": kinds(events),
        "final_state": state_name(final.status.state),
        "answer": answer_of(final),
    }


async def cancel(d):
    task, _ = await d.send("write the report", polling=True)
    client = await d.client()
    cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
    got = await client.get_task(GetTaskRequest(id=task.id))
    again = None
    try:
        await client.cancel_task(CancelTaskRequest(id=task.id))
    except Exception as e:  # TaskNotCancelableError
        again = type(e).__name__
    return {
        "task_id": task.id,
        "cancelled_state": state_name(cancelled.status.state),
        "got_state": state_name(got.status.state),
        "second_cancel_error": again,
    }


async def input_required(d):
    """A high-risk call asks for input; "yes" in the same task resumes it."""
    task, _ = await d.send("add it for real")
    asked = state_name(task.status.state)
    question = " ".join(p.text for p in task.status.message.parts if p.text)
    busy = None
    try:
        await d.send("something else", context_id=task.context_id)
    except Exception as e:  # UnsupportedOperationError: the task waits for its answer
        busy = [type(e).__name__, str(e)]
    unclear = None
    try:
        await d.send("perhaps", context_id=task.context_id, task_id=task.id)
    except Exception as e:  # InvalidParamsError: yes or no, please
        unclear = type(e).__name__
    done, events = await d.send("yes", context_id=task.context_id, task_id=task.id,
                                streaming=d.args.streaming)
    if done is None or done.status.state not in TERMINAL:
        client = await d.client()
        done = await client.get_task(GetTaskRequest(id=task.id))
    return {
        "task_id": task.id,
        "asked_state": asked,
        "question": question,
        "busy_error": busy,
        "unclear_error": unclear,
        "resumed_task_id": done.id,
        "final_state": state_name(done.status.state),
        "answer": answer_of(done),
        "events": kinds(events),
    }


class Receiver(http.server.BaseHTTPRequestHandler):
    got = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Receiver.got.append({
            "token": self.headers.get("X-A2A-Notification-Token"),
            "authorization": self.headers.get("Authorization"),
            "content_type": self.headers.get("Content-Type"),
            "body": json.loads(body),
        })
        # The first notification is refused once: the server must retry it.
        status = 503 if len(Receiver.got) == 1 else 200
        self.send_response(status)
        self.end_headers()

    def log_message(self, *args):
        pass


async def push(d):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    client = await d.client()
    config = TaskPushNotificationConfig(url=url, token="tok-123")
    config.authentication.scheme = "Bearer"
    config.authentication.credentials = "hook-secret"
    request = SendMessageRequest(
        message=user_message("write the report"),
        configuration=SendMessageConfiguration(
            return_immediately=True, task_push_notification_config=config),
    )
    task, _ = await d.collect(client.send_message(request))
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task.id))
    for _ in range(300):
        states = [g["body"].get("statusUpdate", {}).get("status", {}).get("state")
                  for g in Receiver.got]
        if "TASK_STATE_COMPLETED" in states:
            break
        await asyncio.sleep(0.1)
    server.shutdown()
    return {
        "task_id": task.id,
        "configs": [MessageToDict(c) for c in listed.configs],
        "received": Receiver.got,
    }


async def push_wait(d):
    """Send a slow task with a push config, print its id at once, then wait (the caller may
    restart the server meanwhile) until the webhook heard it completed."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    client = await d.client()
    config = TaskPushNotificationConfig(url=url, token="tok-456")
    request = SendMessageRequest(
        message=user_message("write the report"),
        configuration=SendMessageConfiguration(
            return_immediately=True, task_push_notification_config=config),
    )
    task, _ = await d.collect(client.send_message(request))
    print(json.dumps({"started": task.id}), flush=True)
    for _ in range(900):
        states = [g["body"].get("statusUpdate", {}).get("status", {}).get("state")
                  for g in Receiver.got]
        if "TASK_STATE_COMPLETED" in states:
            break
        await asyncio.sleep(0.1)
    server.shutdown()
    return {"task_id": task.id, "received": Receiver.got}


async def start(d):
    """Send a task without waiting (`--text`, default a slow report); print its id."""
    task, _ = await d.send(d.args.text or "write the report", polling=True)
    return {"task_id": task.id, "context_id": task.context_id,
            "state": state_name(task.status.state)}


async def cancel_task(d):
    """Cancel task `--task`."""
    client = await d.client()
    task = await client.cancel_task(CancelTaskRequest(id=d.args.task))
    return {"state": state_name(task.status.state)}


async def remote_tasks(d):
    """Every task the agent at URL lists: its first user text and state."""
    client = await d.client()
    listed = await client.list_tasks(ListTasksRequest(history_length=10))
    return {"tasks": [
        {"id": t.id, "context_id": t.context_id, "state": state_name(t.status.state),
         "text": next((m.parts[0].text for m in t.history if m.role == Role.ROLE_USER), "")}
        for t in listed.tasks
    ]}


async def wait(d):
    """Poll GetTask until the task ends."""
    client = await d.client()
    states = []
    for _ in range(600):
        task = await client.get_task(GetTaskRequest(id=d.args.task))
        states.append(state_name(task.status.state))
        if task.status.state in TERMINAL:
            break
        await asyncio.sleep(0.1)
    return {"states": sorted(set(states)), "final_state": states[-1], "answer": answer_of(task)}


async def raw(d):
    """What the server says to requests the SDK would never send."""
    url = d.args.url
    out = {}
    no_version = await httpx.AsyncClient().post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x.y"}},
        headers={k: v for k, v in d.http.headers.items() if k.lower() == "authorization"})
    out["no_version"] = no_version.json()
    bad_token = await httpx.AsyncClient().get(
        f"{url}/tasks/x.y", headers={"A2A-Version": "1.0", "Authorization": "Bearer wrong"})
    out["bad_token_status"] = bad_token.status_code
    out["bad_token"] = bad_token.json()
    unknown = await d.http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get"},
                                headers={"A2A-Version": "1.0"})
    out["unknown_method"] = unknown.json()
    return out


SCENARIOS = {
    "card": card, "send": send, "stream": stream, "long": long_task, "cancel": cancel,
    "input": input_required, "push": push, "start": start, "wait": wait, "raw": raw,
    "cancel_task": cancel_task, "remote_tasks": remote_tasks, "push_wait": push_wait,
}


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("binding", choices=["JSONRPC", "HTTP+JSON"])
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--token")
    p.add_argument("--task")
    p.add_argument("--text")
    p.add_argument("--streaming", action="store_true")
    args = p.parse_args()
    d = Driver(args)
    result = await SCENARIOS[args.scenario](d)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
