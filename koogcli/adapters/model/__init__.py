"""The model side: the OpenAI SDK client, local servers found on this machine, and what koog
learned from servers."""
