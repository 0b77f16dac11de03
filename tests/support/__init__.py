"""Helpers shared by the tests: servers, terminals, damage, PostgreSQL, forked koogs."""
