"""People and what they may do: roles (groups made by a data migration) and the user admin."""
