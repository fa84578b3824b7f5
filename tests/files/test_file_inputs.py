"""``file_id`` in a response's input: an uploaded text file reaches the
model as text with its name, an uploaded image as a data: URL; a file the
organisation does not have is a 400 naming the parameter."""

from __future__ import annotations

import base64
import io
import time
import uuid

import openai
import pytest

from tests.sim import received

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# The smallest PNG: one transparent pixel.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def upload(client, name: str, content: bytes):
    return client.files.create(file=(name, io.BytesIO(content)), purpose="user_data")


def user(*parts):
    return [{"role": "user", "content": list(parts)}]


def test_an_input_file_by_id_reaches_the_model_as_text_with_its_name(acme, simulator):
    marker = uuid.uuid4().hex
    created = upload(acme, "prices.csv", f"item,price\n{marker},3\n".encode())
    response = acme.responses.create(
        model="sim-model",
        input=user(
            {"type": "input_text", "text": "[[text:read it]]"},
            {"type": "input_file", "file_id": created.id},
        ),
    )
    assert response.output_text == "read it"
    chat = received(simulator, marker)
    content = chat["messages"][-1]["content"]
    assert f'<file name="prices.csv">\nitem,price\n{marker},3\n' in content


def test_an_input_image_by_id_reaches_the_model_as_a_data_url(acme, tenants, simulator):
    from responses_api.models import ServedModel

    ServedModel.objects.filter(id=tenants[0].model.id).update(supports_vision=True)
    time.sleep(0.5)  # the server's catalogue cache (0.3 s in tests)
    created = upload(acme, "pixel.png", PNG)
    marker = uuid.uuid4().hex
    acme.responses.create(
        model="sim-model",
        input=user(
            {"type": "input_text", "text": f"[[text:seen]] {marker}"},
            {"type": "input_image", "file_id": created.id},
        ),
    )
    content = received(simulator, marker)["messages"][-1]["content"]
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert {"type": "image_url", "image_url": {"url": url}} in content


def test_a_text_file_named_as_an_image_is_a_400(acme, tenants):
    from responses_api.models import ServedModel

    ServedModel.objects.filter(id=tenants[0].model.id).update(supports_vision=True)
    time.sleep(0.5)
    created = upload(acme, "notes.txt", b"not an image")
    with pytest.raises(openai.BadRequestError) as refused:
        acme.responses.create(
            model="sim-model", input=user({"type": "input_image", "file_id": created.id})
        )
    assert refused.value.body["param"] == "input[0].content[0].file_id"


def test_another_organisations_file_id_is_a_400_as_an_unknown_one(acme, globex):
    created = upload(acme, "secret.txt", b"acme only")
    messages = []
    for file_id in (created.id, "file-" + uuid.uuid4().hex[:24]):
        with pytest.raises(openai.BadRequestError) as refused:
            globex.responses.create(
                model="sim-model",
                input=user(
                    {"type": "input_text", "text": "hi"},
                    {"type": "input_file", "file_id": file_id},
                ),
            )
        body = refused.value.body
        assert body["param"] == "input[0].content[1].file_id"
        messages.append(body["message"].replace(file_id, "ID"))
    assert messages[0] == messages[1]


def test_a_deleted_file_can_no_longer_be_named(acme):
    created = upload(acme, "gone.txt", b"bye")
    acme.files.delete(created.id)
    with pytest.raises(openai.BadRequestError):
        acme.responses.create(
            model="sim-model", input=user({"type": "input_file", "file_id": created.id})
        )
