"""`python -m fmcluster.mirror`: rewrite fmcluster/node/mirror.sh's pinned digests from artifacts.json."""

from fmcluster.mirror import write_rendered_node_helper

write_rendered_node_helper()
