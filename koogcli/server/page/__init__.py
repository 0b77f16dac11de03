"""The web page of `koog serve` (SPEC §6 "The page"): routes that call the services the
command line calls, Jinja2 templates (autoescaped) and one stylesheet and one small script;
imported with the app, its templates and Markdown only when a page is asked for."""
