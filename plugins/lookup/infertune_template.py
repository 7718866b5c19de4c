"""infertune_template: ansible.builtin.template's lookup, without its deep copy of every variable.

The plan renders each host's unit files on the controller on every run, converged or not;
the built-in lookup deep-copies all the host's variables for each file, which made up half
of a no-op run's rendering. The template sees the same variables (a shallow copy with the
template_* variables added), and is found and rendered the same way.

role=NAME finds the template in that role's templates/ (this collection's roles, then the roles
path) wherever the lookup runs: a role's variables that render its templates are also read from tasks of
other roles (the plan's comparison, the benchmark's include of a role's tasks).
"""
from __future__ import annotations

DOCUMENTATION = r"""
name: infertune_template
author: infertune developers (@infertune)
short_description: render role templates like ansible.builtin.template, without deep-copying the variables
description:
  - Each term is a template file, found like the built-in template lookup finds it (the role's
    C(templates/) first); returns the rendered text of each.
  - The template sees the task's variables and C(template_path), C(template_host) and the other
    template variables; it must not change them (it cannot from Jinja).
options:
  _terms:
    description: template files to render
    required: true
  role:
    description: the role whose C(templates/) holds them, looked up in this collection's roles first, then
      on the roles path; by default the task's search path
    type: str
"""

EXAMPLES = r"""
- name: Render the unit file
  ansible.builtin.set_fact:
    unit_text: "{{ lookup('infertune.fleet.infertune_template', 'sglang.service.j2', role='sglang') }}"
"""

RETURN = r"""
_raw:
  description: the rendered text of each template
  type: list
  elements: str
"""

import os

from ansible import constants as C
from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase
from ansible.template import trust_as_template
from ansible._internal._templating import _template_vars
from ansible._internal._templating._engine import TemplateOptions

COLLECTION_ROLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")


class LookupModule(LookupBase):

    def run(self, terms, variables=None, role=None, **kwargs):
        variables = variables or {}
        rendered = []
        for term in terms:
            path = self._in_role(role, term) if role else self.find_file_in_search_path(variables, "templates", term)
            if not path:
                raise AnsibleError("the template file %s could not be found for the lookup%s"
                                   % (term, " in role %s" % role if role else ""))
            # The role's templates/ and its own directory on each search path, for includes.
            searchpath = [os.path.dirname(path)]
            for base in variables.get("ansible_search_path", []):
                searchpath += [os.path.join(base, "templates"), base]
            # Shallow: the template only reads them; the built-in's deepcopy is the cost saved.
            template_vars = dict(variables)
            template_vars.update(_template_vars.generate_ansible_template_vars(
                path=term, fullpath=path, include_ansible_managed="ansible_managed" not in template_vars))
            templar = self._templar.copy_with_new_env(available_variables=template_vars, searchpath=searchpath)
            source = trust_as_template(self._loader.get_text_file_contents(path))
            rendered.append(templar._engine.template(source, options=TemplateOptions(escape_backslashes=False)))
        return rendered

    @staticmethod
    def _in_role(role, term):
        # This collection's roles first (it ships the lookup), then the roles path.
        for base in [COLLECTION_ROLES] + C.config.get_config_value("DEFAULT_ROLES_PATH"):
            path = os.path.join(base, role, "templates", term)
            if os.path.isfile(path):
                return path
        return None
