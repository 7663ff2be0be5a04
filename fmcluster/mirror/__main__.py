"""`python -m fmcluster.mirror`: rewrite fmcluster/node/mirror.sh's pinned digests and README.md's table from
artifacts.json."""

from fmcluster.mirror import write_rendered_files

write_rendered_files()
