"""plugins/lookup/infertune_template.py renders exactly what ansible.builtin.template's lookup
renders (the plan compares its output with the files the template module wrote)."""
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TEMPLATE = """# {{ ansible_managed | default('managed') }} from {{ template_path | basename }}
{% for name, value in options.items() %}
{{ name }}={{ value }}
{% endfor %}
{% if extra %}
extra: {{ extra | join(' ') }}
{% endif %}
count={{ options | length }}
path\\with\\backslashes "quoted" {{ '{{' }} literal
"""

PLAY = """- hosts: localhost
  gather_facts: false
  vars:
    options: {a: 1, b: "two words", c: "{{ '{{' }} not templated"}
    extra: [x, y]
  roles: [probe, other]
"""

# In the role, as the sglang role renders its files: its templates/ is searched first. From
# another role's tasks, role=probe finds the same template (the plan compares sglang's files).
TASKS = """- name: Render with both lookups
  ansible.builtin.copy:
    dest: "{{ out }}"
    content: "{{ {'ours': lookup('infertune.fleet.infertune_template', 'probe.j2'),
                  'builtin': lookup('ansible.builtin.template', 'probe.j2')} | to_json }}"
    mode: "0644"
"""
OTHER = """- name: Render another role's template
  ansible.builtin.copy:
    dest: "{{ out }}.other"
    content: "{{ lookup('infertune.fleet.infertune_template', 'probe.j2', role='probe') }}"
    mode: "0644"
"""


def test_renders_what_the_builtin_lookup_renders(tmp_path):
    role = tmp_path / "roles" / "probe"
    (role / "templates").mkdir(parents=True)
    (role / "tasks").mkdir()
    (role / "tasks" / "main.yml").write_text(TASKS)
    (tmp_path / "roles" / "other" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "other" / "tasks" / "main.yml").write_text(OTHER)
    (role / "templates" / "probe.j2").write_text(TEMPLATE)
    (tmp_path / "play.yml").write_text(PLAY)
    out = tmp_path / "out.json"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_ROLES_PATH=str(tmp_path / "roles"),
               ANSIBLE_LOOKUP_PLUGINS=str(REPO / "plugins" / "lookup"))
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), str(tmp_path / "play.yml"),
                           "-i", "localhost,", "-c", "local", "-e", f"out={out}",
                           "-e", f"ansible_python_interpreter={sys.executable}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rendered = json.loads(out.read_text())
    assert rendered["ours"] == rendered["builtin"]
    assert "b=two words\n" in rendered["ours"] and "extra: x y\n" in rendered["ours"]
    assert "probe.j2" in rendered["ours"]
    assert (tmp_path / "out.json.other").read_text() == rendered["ours"]


SHADOW_PLAY = """- hosts: localhost
  gather_facts: false
  tasks:
    - name: Render the collection's logrotate file by role
      ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ lookup('infertune.fleet.infertune_template', 'sglang.logrotate.j2', role='sglang') }}"
        mode: "0644"
"""


def test_role_finds_the_collections_own_role_before_one_of_the_same_name_on_the_roles_path(tmp_path):
    """A site's own `sglang` role earlier on the roles path must not replace the unit files the
    collection's sglang role renders (the plan compares them with what that role wrote)."""
    shadow = tmp_path / "roles" / "sglang" / "templates"
    shadow.mkdir(parents=True)
    (shadow / "sglang.logrotate.j2").write_text("impostor: another sglang role's template\n")
    (tmp_path / "play.yml").write_text(SHADOW_PLAY)
    out = tmp_path / "out.txt"
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_ROLES_PATH=str(tmp_path / "roles"))
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), str(tmp_path / "play.yml"),
                           "-i", "localhost,", "-c", "local", "-e", f"out={out}",
                           "-e", f"ansible_python_interpreter={sys.executable}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rendered = out.read_text()
    assert "impostor" not in rendered
    assert rendered.endswith((REPO / "roles" / "sglang" / "templates" / "sglang.logrotate.j2").read_text()
                             .split("\n", 1)[1])
