"""A capable model's decisions in front of a real llama-server, for ``model_check``.

stories260K follows no instruction: asked to call a tool, it writes a story.
The readiness check's prompts carry, beside their natural instructions, the
simulator's directives (``[[call:NAME ARGS]]``, ``[[write:FILE TEXT]]``,
``[[reason:TEXT]]``): what a model that follows them would answer. This
proxy reads those directives from the last user turn and applies the prefill
technique of tests/fixtures/llamacpp/README.md — it appends the assistant
turn such a model would start (the ``<tool_call>`` blocks, or the reasoning),
with end-of-sequence forced after it — and ends a plain-text answer at its
first line break; a request for JSON output goes through unchanged.

Everything Switchyard is checked against stays the real server's: the chat
template's rendering of tools and messages, its tool-call parser, its
grammar for ``json_schema``, its SSE stream, its context-length error, and
the cancellation of a request whose client went away (closing the
downstream connection closes the upstream one).

Run: ``python -m tests.llamacpp.stand_in --upstream http://127.0.0.1:PORT --port N``
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web

# stories260K's end-of-sequence token, biased to be the next one.
FORCE_EOS = {"2": 100}

CALL = re.compile(r"\[\[call:(\S+) (\{.*?\})\]\]")
WRITE = re.compile(r"\[\[write:(\S+) (.*?)\]\]")
REASON = re.compile(r"\[\[reason:(.*?)\]\]")
TOKENS = re.compile(r"\[\[tokens:(\d+)\]\]")
# From this many tokens asked for, an answer is long.
LONG = 100


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or () if isinstance(part, dict))


def _patch(path: str, line: str) -> str:
    return f"*** Begin Patch\n*** Add File: {path}\n+{line}\n*** End Patch\n"


def _tool_calls(body: dict[str, Any], prompt: str) -> list[dict[str, Any]]:
    names = {(tool.get("function") or {}).get("name") for tool in body.get("tools") or ()}
    calls = [
        {"name": name, "arguments": json.loads(arguments)}
        for name, arguments in CALL.findall(prompt)
        if name in names
    ]
    if "apply_patch" in names:
        calls += [
            {"name": "apply_patch", "arguments": {"input": _patch(path, line)}}
            for path, line in WRITE.findall(prompt)
        ]
    return calls


def prefill(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with the assistant turn a model following the prompt would begin."""
    messages = body.get("messages") or []
    prompt = _text(messages[-1]) if messages and messages[-1].get("role") == "user" else ""
    if body.get("tools") and body.get("tool_choice") != "none":
        calls = _tool_calls(body, prompt)
        if calls:
            blocks = "\n".join(f"<tool_call>\n{json.dumps(call)}\n</tool_call>" for call in calls)
            turn = {"role": "assistant", "content": blocks}
            return {**body, "messages": [*messages, turn], "logit_bias": FORCE_EOS}
    thinking = (body.get("chat_template_kwargs") or {}).get("enable_thinking")
    reason = REASON.search(prompt)
    if thinking and reason:
        turn = {"role": "assistant", "reasoning_content": reason.group(1), "content": "Hi."}
        return {**body, "messages": [*messages, turn], "logit_bias": FORCE_EOS}
    length = TOKENS.search(prompt)
    if length and int(length.group(1)) >= LONG:
        # Asked for a long text, it writes one: no end-of-sequence or stop
        # cuts it short (the check of cancellation leaves in its middle).
        return {**body, "logit_bias": {"2": -100}}
    if body.get("response_format") is None:
        # A short answer, as asked: the tiny model's stories end at their first
        # line break. (JSON output is left to the server's grammar.)
        return {**body, "stop": ["\n"]}
    return body


async def _forward(request: web.Request) -> web.StreamResponse:
    session: ClientSession = request.app["session"]
    upstream = request.app["upstream"] + request.path_qs
    data = await request.read()
    if request.method == "POST" and request.path.endswith("/chat/completions"):
        data = json.dumps(prefill(json.loads(data))).encode()
    headers = {
        k: v
        for k, v in request.headers.items()
        if k.lower() not in {"host", "content-length", "transfer-encoding"}
    }
    async with session.request(request.method, upstream, data=data, headers=headers) as answer:
        reply = web.StreamResponse(status=answer.status)
        for name in ("Content-Type", "Cache-Control"):
            if name in answer.headers:
                reply.headers[name] = answer.headers[name]
        await reply.prepare(request)
        async for chunk in answer.content.iter_any():
            await reply.write(chunk)
        await reply.write_eof()
        return reply


async def _session(app: web.Application):
    app["session"] = ClientSession(timeout=ClientTimeout(total=None, sock_connect=5))
    yield
    await app["session"].close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="llama-server's root URL")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = web.Application()
    app["upstream"] = args.upstream.rstrip("/")
    app.cleanup_ctx.append(_session)
    app.router.add_route("*", "/{tail:.*}", _forward)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
