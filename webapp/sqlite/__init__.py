"""Django's SQLite backend with the process's writers queued for the write lock (see `base`)."""
