"""The official OpenAI and Anthropic Python SDKs against levee-gateway.

Run by tests/sdk_clients.rs, which starts the fake providers and the
gateway and passes its URL and client key:

    LEVEE_URL=http://127.0.0.1:4000 LEVEE_KEY=sk-... python check_sdks.py

Routes the Rust side configures (each model's own fake provider):
  ok             answers, plain and streamed
  throttle       answers 429 `retry-after: 1` once, then serves
  failover       a primary that answers 503, a backup that serves
  claude-ok, claude-throttle, claude-failover: the same, in Anthropic's API

Each check prints one line; any failure raises, and the exit code says so.
"""

import os
import sys
import time

import anthropic
import openai

URL = os.environ["LEVEE_URL"]
KEY = os.environ["LEVEE_KEY"]


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + (": " + detail if detail else ""), flush=True)
    if not ok:
        raise SystemExit(1)


def openai_checks():
    client = openai.OpenAI(base_url=URL + "/v1", api_key=KEY, max_retries=2)
    messages = [{"role": "user", "content": "hi"}]

    raw = client.chat.completions.with_raw_response.create(model="ok", messages=messages)
    completion = raw.parse()
    check("openai: a completion", completion.choices[0].message.content == "Hello from ok")
    check("openai: served-by header", raw.headers.get("x-levee-served-by") == "ok-target")

    pieces = []
    for chunk in client.chat.completions.create(model="ok", messages=messages, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
    check("openai: a stream read chunk by chunk", pieces == ["Hel", "lo ", "from ", "ok"], repr(pieces))

    # The provider's own 429, passed through untouched.
    no_retry = client.with_options(max_retries=0)
    try:
        no_retry.chat.completions.create(model="throttle", messages=messages)
        check("openai: the provider's 429", False, "no error")
    except openai.RateLimitError as e:
        check("openai: the provider's 429 is the SDK's RateLimitError", "x-levee-refusal" not in e.response.headers)

    # Levee's own refusal: the target is gated, nothing was sent.
    try:
        no_retry.chat.completions.create(model="throttle", messages=messages)
        check("openai: Levee's refusal", False, "no error")
    except openai.RateLimitError as e:
        check("openai: Levee's refusal is a RateLimitError", e.response.headers.get("x-levee-refusal") == "throttled")
        check("openai: its error type names Levee", e.body.get("type") == "levee_refusal", repr(e.body))
        wait_ms = float(e.response.headers["retry-after-ms"])
        check("openai: it says how long to wait", 0 < wait_ms <= 1000, str(wait_ms))

    # With its retries, the SDK waits the refusal's wait out and is served.
    started = time.monotonic()
    completion = client.chat.completions.create(model="throttle", messages=messages)
    waited = time.monotonic() - started
    check("openai: the SDK's retry honours the wait and is served", completion.choices[0].message.content == "Hello from throttle")
    check("openai: it waited rather than hammering", waited >= 0.3, "%.2fs" % waited)

    raw = client.chat.completions.with_raw_response.create(model="failover", messages=messages)
    check("openai: a failover the client never sees", raw.parse().choices[0].message.content == "Hello from failover-backup")
    check("openai: served by the backup", raw.headers.get("x-levee-served-by") == "failover-backup")


def anthropic_checks():
    client = anthropic.Anthropic(base_url=URL, api_key=KEY, max_retries=2)
    messages = [{"role": "user", "content": "hi"}]

    message = client.messages.create(model="claude-ok", max_tokens=16, messages=messages)
    check("anthropic: a message", message.content[0].text == "Hello from claude-ok")

    pieces = []
    with client.messages.stream(model="claude-ok", max_tokens=16, messages=messages) as stream:
        for text in stream.text_stream:
            pieces.append(text)
    check("anthropic: a stream read chunk by chunk", pieces == ["Hel", "lo ", "from ", "claude-ok"], repr(pieces))

    no_retry = client.with_options(max_retries=0)
    try:
        no_retry.messages.create(model="claude-throttle", max_tokens=16, messages=messages)
        check("anthropic: the provider's 429", False, "no error")
    except anthropic.RateLimitError as e:
        check("anthropic: the provider's 429 is the SDK's RateLimitError", "x-levee-refusal" not in e.response.headers)
    try:
        no_retry.messages.create(model="claude-throttle", max_tokens=16, messages=messages)
        check("anthropic: Levee's refusal", False, "no error")
    except anthropic.RateLimitError as e:
        check("anthropic: Levee's refusal is a RateLimitError", e.response.headers.get("x-levee-refusal") == "throttled")
        check("anthropic: its error type names Levee", e.body["error"]["type"] == "levee_refusal", repr(e.body))

    started = time.monotonic()
    message = client.messages.create(model="claude-throttle", max_tokens=16, messages=messages)
    waited = time.monotonic() - started
    check("anthropic: the SDK's retry honours the wait and is served", message.content[0].text == "Hello from claude-throttle")
    check("anthropic: it waited rather than hammering", waited >= 0.3, "%.2fs" % waited)

    message = client.messages.create(model="claude-failover", max_tokens=16, messages=messages)
    check("anthropic: a failover the client never sees", message.content[0].text == "Hello from claude-failover-backup")


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    if which in ("all", "openai"):
        openai_checks()
    if which in ("all", "anthropic"):
        anthropic_checks()
    print("all SDK checks passed", flush=True)
