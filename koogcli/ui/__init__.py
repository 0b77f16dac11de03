"""Terminal output shared by the command line and the REPL: text, JSON, Markdown, views."""
