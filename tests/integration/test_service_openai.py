"""The service through the official ``openai`` Python client (issue 26), on a real server on
a free 127.0.0.1 port: the model list, plain and streamed completions equal to the library's
seeded run, ``stop`` (string or list, whole and streamed, also read back from the journal),
``stream_options.include_usage``, ``user``, and the fields the service does not support
answered with a 422 that names them.
"""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")  # the serve extra
pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")

from support import load_models, reference_text  # noqa: E402

from specdec_lite.service.app import MODEL_NAME  # noqa: E402
from specdec_lite.service.launch import start_server  # noqa: E402

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def models():
    return load_models()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("openai")
    with start_server(data_dir=tmp / "data", log_path=tmp / "server.log") as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0,
                         timeout=60)


BODY = dict(prompt="def __init__(self", max_tokens=60, temperature=1.0, seed=11,
            method="draft", k=3)


def create(client, body: dict, **extra):
    """``client.completions.create`` for one of the service's bodies (its own fields go
    in ``extra_body``, as OpenAI's client sends fields it does not know)."""
    own = {name: body[name] for name in ("method", "k", "request_id") if name in body}
    return client.completions.create(
        model=MODEL_NAME, prompt=body["prompt"], max_tokens=body["max_tokens"],
        temperature=body["temperature"], seed=body["seed"], extra_body=own, **extra)


def test_models_lists_the_served_model(client):
    assert [m.id for m in client.models.list()] == [MODEL_NAME]


def test_completion_equals_the_library(client, models):
    reply = create(client, BODY, user="someone")
    assert reply.choices[0].text == reference_text(models, BODY)
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens == BODY["max_tokens"]


def test_stream_with_usage_concatenates_to_the_whole_answer(client, models):
    chunks = list(create(client, BODY, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == reference_text(models, BODY)
    assert not chunks[-1].choices and chunks[-1].usage.completion_tokens == BODY["max_tokens"]


@pytest.mark.parametrize("stop", ["\n", ["zzz", "):"], ["    ", "\n"]])
def test_stop_ends_the_text_before_the_stop_sequence(client, models, stop):
    body = {**BODY, "temperature": 0.0, "max_tokens": 120}
    full = reference_text(models, body)
    stops = [stop] if isinstance(stop, str) else stop
    cut = min(full.index(s) for s in stops if s in full)
    whole = create(client, body, stop=stop)
    assert whole.choices[0].text == full[:cut]
    assert whole.choices[0].finish_reason == "stop"
    streamed = list(create(client, body, stop=stop, stream=True))
    assert "".join(c.choices[0].text for c in streamed if c.choices) == full[:cut]
    assert streamed[-1].choices[0].finish_reason == "stop"


def test_a_stopped_result_reads_back_cut_from_the_journal(server, client, models):
    import httpx

    body = {**BODY, "temperature": 0.0, "max_tokens": 120, "request_id": "stop-journal"}
    full = reference_text(models, body)
    first = create(client, body, stop="\n")
    stored = httpx.get(server.url + "/v1/completions/stop-journal", timeout=10).json()
    assert stored["choices"][0]["text"] == first.choices[0].text == full[: full.index("\n")]
    assert stored["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize(("extra", "field"), [({"echo": True}, "echo"),
                                              ({"logprobs": 2}, "logprobs"),
                                              ({"n": 2}, "n"),
                                              ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
                                              ({"stop": "\u20ac"}, "stop")])
def test_unsupported_fields_are_422_naming_them(client, extra, field):
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        create(client, BODY, **extra)
    locs = [tuple(d["loc"]) for d in caught.value.body["detail"]] \
        if isinstance(caught.value.body, dict) else [tuple(d["loc"]) for d in caught.value.body]
    assert any(field in loc for loc in locs), locs
