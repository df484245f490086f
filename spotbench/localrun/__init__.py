"""The local cloud's runtime: deploy groups as local instances, serve the functions with
the real functions-framework server, fire the start/stop pair from an in-process cron."""
