"""
What a Python program does with Ollama's official client (`ollama` from PyPI, pinned in
test/support/agent-programs.ts), each call in turn against an Ollama-style server, its outcome
printed as one JSON object. An error is recorded (its class, status and message), never raised, so
one failing call does not hide the others. Before each call it posts the call's name to
`<url>/__call`, so a recording server can file the requests that follow under it
(test/support/record-ollama-clients.ts).

  python ollama-python-calls.py '{"url": ..., "key": ..., "image": <base64 PNG>, "image_path": ..., "record": true}'
"""
import base64
import json
import os
import sys
import urllib.request

import ollama
from pydantic import BaseModel

config = json.loads(sys.argv[1])
URL = config["url"]
client = ollama.Client(host=URL, headers={"Authorization": f"Bearer {config['key']}"})
# The model that calls tools (Hearth's tests name one whose weights write a call).
TOOLS_MODEL = config.get("tools_model", "tiny")
QUESTION = [{"role": "system", "content": "Answer in one short sentence."}, {"role": "user", "content": "What is the capital of France?"}]
OPTIONS = {"temperature": 0, "num_predict": 40, "num_ctx": 2048, "seed": 1, "top_k": 20, "top_p": 0.9, "stop": ["\n\n"]}
results = {}


def mark(name):
    # Against a recording server only: Hearth's tests run the same calls with "record": false.
    if not config.get("record", True):
        return
    urllib.request.urlopen(urllib.request.Request(f"{URL}/__call", data=json.dumps({"name": name}).encode(), method="POST")).read()


def plain(value):
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def call(name, fn):
    mark(name)
    try:
        results[name] = {"ok": plain(fn())}
    except ollama.ResponseError as e:
        results[name] = {"error": {"class": type(e).__name__, "status_code": e.status_code, "error": e.error, "str": str(e)}}
    except Exception as e:  # the client itself failed: what it said is the finding
        results[name] = {"error": {"class": type(e).__name__, "message": str(e)[:400]}}


def drain(stream):
    chunks, text, last = 0, "", None
    for chunk in stream:
        chunks += 1
        message = getattr(chunk, "message", None)
        text += (message.content if message else getattr(chunk, "response", "")) or ""
        last = chunk
    return {"chunks": chunks, "text": text, "last": plain(last)}


def weather(city: str) -> str:
    """The weather in a city

    Args:
      city: The city
    """
    return f"22 degrees and sunny in {city}"


class City(BaseModel):
    name: str
    country: str


def chat_tools():
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.chat(model=TOOLS_MODEL, messages=messages, tools=[weather])
    messages.append(first.message)
    for tc in first.message.tool_calls or []:
        messages.append({"role": "tool", "content": weather(**tc.function.arguments), "tool_name": tc.function.name})
    second = client.chat(model=TOOLS_MODEL, messages=messages, tools=[weather])
    return {"first": plain(first.message), "second": plain(second.message)}


def with_env_key():
    os.environ["OLLAMA_API_KEY"] = "env-key-4567"
    try:
        return ollama.Client(host=URL).list()
    finally:
        del os.environ["OLLAMA_API_KEY"]


def with_env_host():
    os.environ["OLLAMA_HOST"] = URL
    try:
        return ollama.Client().ps()
    finally:
        del os.environ["OLLAMA_HOST"]


image_bytes = base64.b64decode(config["image"])
call("list", lambda: client.list())
call("list with OLLAMA_API_KEY only", with_env_key)
call("ps with OLLAMA_HOST only (no client version() in 0.6.3)", with_env_host)
call("show", lambda: client.show("tiny"))
call("ps", lambda: client.ps())
call("chat", lambda: client.chat(model="tiny", messages=QUESTION, options=OPTIONS, keep_alive="5m"))
call("chat stream", lambda: drain(client.chat(model="tiny", messages=QUESTION, stream=True)))
call("chat think", lambda: client.chat(model="tiny", messages=QUESTION, think=True))
call("chat think level", lambda: client.chat(model="tiny", messages=QUESTION, think="low"))
call("chat format json", lambda: client.chat(model="tiny", messages=QUESTION, format="json"))
call("chat format pydantic", lambda: City.model_validate_json(client.chat(model="tiny", messages=QUESTION, format=City.model_json_schema()).message.content))
call("chat keep_alive 0", lambda: client.chat(model="tiny", messages=[], keep_alive=0))
call("chat tools (a Python function)", chat_tools)
call("chat tools stream", lambda: drain(client.chat(model=TOOLS_MODEL, messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[weather], stream=True)))
call("chat image path", lambda: client.chat(model="tiny-vision", messages=[{"role": "user", "content": "What is in this picture?", "images": [config["image_path"]]}]))
call("chat image bytes", lambda: client.chat(model="tiny-vision", messages=[{"role": "user", "content": "What is in this picture?", "images": [image_bytes]}]))
call("generate", lambda: client.generate(model="tiny", prompt="Why is the sky blue?", system="Be brief.", options=OPTIONS, keep_alive="1m"))
call("generate stream", lambda: drain(client.generate(model="tiny", prompt="Why is the sky blue?", stream=True)))
call("generate raw", lambda: client.generate(model="tiny", prompt="<|im_start|>user\nHi<|im_end|>\n", raw=True))
call("generate suffix", lambda: client.generate(model="tiny", prompt="def add(a, b):", suffix="    return c"))
call("generate think format", lambda: client.generate(model="tiny", prompt="A city?", think=True, format=City.model_json_schema()))
call("generate image", lambda: client.generate(model="tiny-vision", prompt="Describe it.", images=[image_bytes]))
call("generate load", lambda: client.generate(model="tiny"))
call("embed", lambda: client.embed(model="tiny-embed", input=["first text", "second text"], truncate=True, keep_alive="5m", dimensions=8))
call("embed one", lambda: client.embed(model="tiny-embed", input="one text"))
call("embeddings (legacy)", lambda: client.embeddings(model="tiny-embed", prompt="one text"))
call("pull", lambda: drain(client.pull("pullable", stream=True)))
call("pull not streamed", lambda: client.pull("pullable"))
call("pull missing", lambda: drain(client.pull("missing-model", stream=True)))
call("copy", lambda: client.copy("tiny", "tiny-copy"))
call("delete", lambda: client.delete("tiny-copy"))
call("create", lambda: drain(client.create(model="made", from_="tiny", system="You are made.", parameters={"temperature": 0.3}, stream=True)))
call("push", lambda: client.push("tiny"))
call("error show missing", lambda: client.show("nope"))
call("error chat missing", lambda: client.chat(model="nope", messages=QUESTION))
call("error chat stream missing", lambda: drain(client.chat(model="nope", messages=QUESTION, stream=True)))
call("error 400", lambda: client.chat(model="fail-400", messages=QUESTION))
call("error 401", lambda: client.chat(model="fail-401", messages=QUESTION))
call("error 500", lambda: client.chat(model="fail-500", messages=QUESTION))
call("error mid-stream", lambda: drain(client.chat(model="fail-midstream", messages=QUESTION, stream=True)))
call("error delete missing", lambda: client.delete("nope"))
print(json.dumps(results))
