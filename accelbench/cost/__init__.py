"""What an hour of the machine costs, and the figures per dollar derived from it.

A price is never guessed: it is what the user stated (``--price-per-hour``, ``config.toml``), an owned
machine's purchase spread over the years it is used (plus energy at a stated board power, labelled so),
or a dated row of the shipped instance table that the user named (``--instance``). Each record made with
a price keeps it, with its source, in ``system.price``; the per-dollar figures are derived once, here,
and so are the per-joule ones from the energy a window's counters measured (``figures.energy``).
"""
