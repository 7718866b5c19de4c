"""Each play of the shipped playbooks imports the engine role (infertune) at most once. An
import_role of a role with dependencies queues a role_complete step per host for the role and
for each dependency, and Ansible's linear strategy works out the host's variables for every one
in its main process: a second import in a play cost every host of the fleet twelve of them."""
import pytest
import yaml

from fakehost import REPO

PLAYBOOKS = sorted((REPO / "playbooks").glob("*.yml"))


def imported_roles(tasks):
    """The roles a list of tasks imports, blocks included, in order."""
    for task in tasks or []:
        for key in ("block", "rescue", "always"):
            yield from imported_roles(task.get(key))
        for action in ("ansible.builtin.import_role", "import_role"):
            if action in task:
                yield task[action]["name"]


def dependencies(role):
    meta = REPO / "roles" / role.rsplit(".", 1)[-1] / "meta" / "main.yml"
    return (yaml.safe_load(meta.read_text()) or {}).get("dependencies") or [] if meta.exists() else []


def test_the_engine_role_has_dependencies():
    """What makes a second import costly (the test below would pass without it)."""
    assert len(dependencies("infertune.fleet.infertune")) >= 5


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=lambda p: p.name)
def test_a_play_imports_a_role_with_dependencies_once(playbook):
    for play in yaml.safe_load(playbook.read_text()) or []:
        if "tasks" not in play:
            continue
        roles = [r for r in imported_roles(play["tasks"]) if dependencies(r)]
        assert len(roles) == len(set(roles)), f"{playbook.name}: play {play['name']!r} imports {roles}"
