"""The pull-request gate (``personalens gate``): everything that decides the verdict from a trusted commit,
only the bot from the pull request, one pytest run; and the explicit step that promotes its recording on main."""
