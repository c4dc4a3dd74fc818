"""Who may use what, and how much: groups' skills, rules and models, budgets and storage quotas.

Below `runs` in the layers (it imports only the core and the models), so a run, a view and a
trigger run all ask the same functions: `access` (a person's policy), `skills` (the skills their
groups offer), `rules` (which admin rules apply to them), `budgets` (dollars, reserved before each
model call), `storage` (bytes). docs/organisation.md describes them for administrators.
"""
