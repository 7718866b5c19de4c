"""Each play of the shipped playbooks takes the roles' variables (the engine's tasks/variables.yml,
a static import of every role) at most once. Each import_role queues a role_complete step per host,
and Ansible's linear strategy works out the host's variables for every one in its main process: a
second import in a play cost every host of the fleet a dozen of them."""
import pytest
import yaml

from fakehost import REPO

PLAYBOOKS = sorted((REPO / "playbooks").glob("*.yml"))
TASKS = REPO / "roles" / "infertune" / "tasks"


def imports(tasks):
    """(role, task file) of each import_role, and ("", file) of each import_tasks, blocks included."""
    for task in tasks or []:
        for key in ("block", "rescue", "always"):
            yield from imports(task.get(key))
        for action in ("ansible.builtin.import_role", "import_role"):
            if action in task:
                yield task[action]["name"], task[action].get("tasks_from", "main")
        for action in ("ansible.builtin.import_tasks", "import_tasks"):
            if action in task:
                yield "", task[action].rsplit(".", 1)[0]


def takes_variables(role, entry, seen=()):
    """How many times importing the engine's ENTRY imports its variables.yml, its own imports followed."""
    if not role.endswith("infertune.fleet.infertune") and role:
        return 0
    if entry == "variables":
        return 1
    path = TASKS / f"{entry}.yml"
    if entry in seen or not path.exists():
        return 0
    return sum(takes_variables(r or "infertune.fleet.infertune", e, seen + (entry,))
               for r, e in imports(yaml.safe_load(path.read_text())))


def test_the_engine_takes_the_roles_variables_in_its_entry_points():
    """What makes a second import costly (the test below would pass without it)."""
    assert [takes_variables("infertune.fleet.infertune", e) for e in ("rollout_plan", "apply", "verify", "drift")] == [
        1, 1, 1, 1]
    variables = yaml.safe_load((TASKS / "variables.yml").read_text())
    assert len(list(imports(variables))) >= 10


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=lambda p: p.name)
def test_a_play_takes_the_roles_variables_once(playbook):
    for play in yaml.safe_load(playbook.read_text()) or []:
        if "tasks" not in play:
            continue
        count = sum(takes_variables(role, entry) for role, entry in imports(play["tasks"]))
        assert count <= 1, f"{playbook.name}: play {play['name']!r} takes the roles' variables {count} times"
