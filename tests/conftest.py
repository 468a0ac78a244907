import pytest

from tests.integration_fixtures import (  # noqa: F401  (fixtures)
    client,
    gateway,
    refused_gateway,
    scripted,
    store_path,
    store_template,
    upstream,
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
