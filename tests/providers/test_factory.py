import pytest
from django.core.exceptions import ImproperlyConfigured

from sessiontree.models import Agent
from sessiontree.providers.factory import (
    get_provider,
    get_provider_for_agent,
    get_provider_for_session,
    provider_kinds,
    resolve_session_provider_kind,
)
from sessiontree.providers.file_provider import FileSessionTreeProvider
from sessiontree.providers.mysql_provider import MySQLSessionTreeProvider


def test_defaults_to_file():
    assert resolve_session_provider_kind(None) == "file"
    assert resolve_session_provider_kind({}) == "file"
    assert resolve_session_provider_kind({"sessionProvider": ""}) == "file"


def test_accepts_the_registered_kinds():
    assert provider_kinds() == ("file", "mysql")
    assert resolve_session_provider_kind({"sessionProvider": "file"}) == "file"
    assert resolve_session_provider_kind({"sessionProvider": "mysql"}) == "mysql"
    assert resolve_session_provider_kind({"session_provider": "MySQL "}) == "mysql"
    assert resolve_session_provider_kind("mysql") == "mysql"


@pytest.mark.parametrize("config", [{"sessionProvider": "redis"}, {"sessionProvider": 3}, "postgres"])
def test_an_unknown_kind_is_a_configuration_error_not_a_silent_file(config):
    # The kernel plan's first draft fell back to "file"; a misconfigured agent
    # silently writing files is worse than a clear error (issue 8).
    with pytest.raises(ImproperlyConfigured, match="Unknown session provider"):
        resolve_session_provider_kind(config)
    with pytest.raises(ImproperlyConfigured, match="known providers: file, mysql"):
        get_provider("redis")


def test_resolution_order_explicit_then_agent_then_setting_then_file(settings):
    settings.SESSIONTREE_DEFAULT_PROVIDER = "mysql"
    assert resolve_session_provider_kind(None) == "mysql"
    assert resolve_session_provider_kind({"sessionProvider": "file"}) == "file"
    assert resolve_session_provider_kind({"sessionProvider": "file"}, explicit="mysql") == "mysql"
    assert resolve_session_provider_kind({}, explicit="file") == "file"
    settings.SESSIONTREE_DEFAULT_PROVIDER = ""
    assert resolve_session_provider_kind(None) == "file"
    settings.SESSIONTREE_DEFAULT_PROVIDER = "nosuch"
    with pytest.raises(ImproperlyConfigured, match="SESSIONTREE_DEFAULT_PROVIDER"):
        resolve_session_provider_kind(None)


@pytest.mark.django_db
def test_an_agent_without_a_choice_follows_the_default_setting(settings):
    agent = Agent.objects.create(name="a")
    assert agent.session_provider == ""
    assert resolve_session_provider_kind(agent) == "file"
    assert isinstance(get_provider_for_agent(agent), FileSessionTreeProvider)
    settings.SESSIONTREE_DEFAULT_PROVIDER = "mysql"
    assert resolve_session_provider_kind(agent) == "mysql"
    assert isinstance(get_provider_for_agent(agent), MySQLSessionTreeProvider)
    chosen = Agent.objects.create(name="b", session_provider="file")
    assert isinstance(get_provider_for_agent(chosen), FileSessionTreeProvider)


def test_the_registry_comes_from_settings(settings):
    settings.SESSIONTREE_PROVIDERS = {"file": "sessiontree.providers.file_provider.FileSessionTreeProvider"}
    assert provider_kinds() == ("file",)
    with pytest.raises(ImproperlyConfigured, match="known providers: file"):
        get_provider("mysql")
    settings.SESSIONTREE_PROVIDERS = {"file": "nowhere.Provider"}
    with pytest.raises(ImproperlyConfigured, match="cannot be imported"):
        get_provider("file")


@pytest.mark.django_db
def test_get_provider_uses_settings(settings, tmp_path):
    settings.SESSIONTREE_FILE_ROOT = str(tmp_path)
    settings.SESSIONTREE_DEFAULT_PROVIDER = "file"
    provider = get_provider()
    assert provider.kind == "file"
    session = provider.create_session(session_id="x1")
    assert session["session_file"].startswith(str(tmp_path))
    assert get_provider_for_session("x1").kind == "file"
