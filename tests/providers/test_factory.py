import pytest

from sessiontree.models import Agent
from sessiontree.providers.factory import (
    get_provider,
    get_provider_for_agent,
    get_provider_for_session,
    resolve_session_provider_kind,
)
from sessiontree.providers.file_provider import FileSessionTreeProvider


def test_defaults_to_file():
    assert resolve_session_provider_kind(None) == "file"
    assert resolve_session_provider_kind({}) == "file"


def test_accepts_file_and_mysql_only():
    assert resolve_session_provider_kind({"sessionProvider": "file"}) == "file"
    assert resolve_session_provider_kind({"sessionProvider": "mysql"}) == "mysql"
    assert resolve_session_provider_kind({"session_provider": "MySQL "}) == "mysql"
    assert resolve_session_provider_kind({"sessionProvider": "redis"}) == "file"
    assert resolve_session_provider_kind({"sessionProvider": 3}) == "file"
    assert resolve_session_provider_kind("mysql") == "mysql"


@pytest.mark.django_db
def test_agent_field_defaults_to_file():
    agent = Agent.objects.create(name="a")
    assert agent.session_provider == "file"
    assert resolve_session_provider_kind(agent) == "file"
    assert isinstance(get_provider_for_agent(agent), FileSessionTreeProvider)


@pytest.mark.django_db
def test_get_provider_uses_settings(settings, tmp_path):
    settings.SESSIONTREE_FILE_ROOT = str(tmp_path)
    settings.SESSIONTREE_DEFAULT_PROVIDER = "file"
    provider = get_provider()
    assert provider.kind == "file"
    session = provider.create_session(session_id="x1")
    assert session["session_file"].startswith(str(tmp_path))
    assert get_provider_for_session("x1").kind == "file"
