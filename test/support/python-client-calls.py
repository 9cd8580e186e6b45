"""
What a Python program does with OpenAI's and Anthropic's official clients, against Hearth: each
call in turn, its outcome printed as one JSON object for test/engines/python-clients.test.ts to judge, with
the fields each client's create methods take. An error is recorded (its class, status and body),
never raised, so one failing call does not hide the others.

  python python-client-calls.py '{"base_url": ..., "api_key": ..., "chat_model": ..., ...}'
"""
import inspect
import json
import sys

import anthropic
import openai
from pydantic import BaseModel

config = json.loads(sys.argv[1])
client = openai.OpenAI(base_url=config["base_url"], api_key=config["api_key"], max_retries=0)
CHAT = config["chat_model"]
SHORT = "Answer in one short sentence."
QUESTION = "What is the capital of France?"
QUESTION_MESSAGES = [{"role": "system", "content": SHORT}, {"role": "user", "content": QUESTION}]
results = {}


def call(name, fn):
    try:
        results[name] = {"ok": fn()}
    except (openai.APIStatusError, anthropic.APIStatusError) as e:
        results[name] = {"error": {"class": type(e).__name__, "status": e.status_code, "body": e.body}}
    except Exception as e:  # the client itself failed: what it said is the finding
        results[name] = {"error": {"class": type(e).__name__, "message": str(e)}}


class City(BaseModel):
    name: str
    country: str


def chat_stream():
    text, usage = "", None
    for chunk in client.chat.completions.create(
        model=CHAT, messages=QUESTION_MESSAGES, temperature=0, max_tokens=40, stream=True, stream_options={"include_usage": True}
    ):
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage:
            usage = chunk.usage.model_dump()
    return {"text": text, "usage": usage}


def responses_stream(max_output_tokens):
    types, deltas = [], ""
    with client.responses.stream(
        model=CHAT, instructions=SHORT, input=QUESTION, temperature=0, max_output_tokens=max_output_tokens
    ) as stream:
        for event in stream:
            types.append(event.type)
            if event.type == "response.output_text.delta":
                deltas += event.delta
        final = stream.get_final_response() if types[-1] == "response.completed" else None
    return {"types": types, "deltas": deltas, "final_text": final.output_text if final else None}


def transcription():
    with open(config["audio"], "rb") as audio:
        answer = client.audio.transcriptions.create(
            model=config["speech_model"], file=audio, response_format="verbose_json", timestamp_granularities=["word"]
        )
    return {"text": answer.text, "words": [w.model_dump() for w in answer.words or []]}


call("models", lambda: [m.id for m in client.models.list()])
call("model", lambda: client.models.retrieve(CHAT).id)
call(
    "chat",
    lambda: client.chat.completions.create(model=CHAT, messages=QUESTION_MESSAGES, temperature=0, max_tokens=40)
    .choices[0]
    .message.content,
)
call("chat_stream", chat_stream)
call(
    "chat_parse",
    lambda: client.chat.completions.parse(
        model=CHAT, messages=[{"role": "user", "content": "Name a city in France."}], response_format=City, temperature=0, max_tokens=60
    )
    .choices[0]
    .message.parsed.model_dump(),
)
call(
    "responses",
    lambda: client.responses.create(model=CHAT, instructions=SHORT, input=QUESTION, temperature=0, max_output_tokens=40).output_text,
)
call("responses_stream", lambda: responses_stream(40))
call("responses_stream_cut", lambda: responses_stream(3))
call(
    "embeddings",
    lambda: [d.embedding for d in client.embeddings.create(model=config["embedding_model"], input=["a cat", "a kitten", "the stock market"]).data],
)
call("transcription", transcription)
call("bad_max_tokens", lambda: client.chat.completions.create(model=CHAT, messages=QUESTION_MESSAGES, max_tokens=-3).id)
call("unknown_model", lambda: client.chat.completions.create(model="no-such-model", messages=QUESTION_MESSAGES).id)
call(
    "wrong_key",
    lambda: openai.OpenAI(base_url=config["base_url"], api_key="not-the-key", max_retries=0).models.list().data,
)
claude = anthropic.Anthropic(base_url=config["base_url"].removesuffix("/v1"), api_key=config["api_key"], max_retries=0)


def messages_stream():
    with claude.messages.stream(model=CHAT, max_tokens=40, system=SHORT, messages=[{"role": "user", "content": QUESTION}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    return {"text": text, "stop_reason": final.stop_reason, "final_text": final.content[0].text}


call(
    "messages",
    lambda: claude.messages.create(model=CHAT, max_tokens=40, system=SHORT, messages=[{"role": "user", "content": QUESTION}])
    .content[0]
    .text,
)
call("messages_stream", messages_stream)
call("messages_count", lambda: claude.messages.count_tokens(model=CHAT, messages=[{"role": "user", "content": QUESTION}]).input_tokens)
call("messages_bad_max_tokens", lambda: claude.messages.create(model=CHAT, max_tokens=-1, messages=[{"role": "user", "content": QUESTION}]).id)


def fields(create):
    """The body fields a create method takes (the client's own transport options left out)."""
    return [p for p in inspect.signature(create).parameters if not p.startswith("extra_") and p != "timeout"]


results["fields"] = {
    "chat": fields(client.chat.completions.create),
    "responses": fields(client.responses.create),
    "messages": fields(claude.messages.create),
}
results["versions"] = {"openai": openai.__version__, "anthropic": anthropic.__version__}
print(json.dumps(results))
