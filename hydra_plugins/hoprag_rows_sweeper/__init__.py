"""hoprag's Hydra sweeper over an explicit list of jobs (`hydra/sweeper=rows`), in `hydra_plugins` because Hydra
only loads plugins from that namespace: see `rows_sweeper`."""
