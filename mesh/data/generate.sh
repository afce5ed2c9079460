#!/bin/sh
# Regenerates the test meshes from their .geo files with Gmsh (Debian's
# `gmsh` package, 4.8.4 made the committed files): each geometry in MSH 2.2
# and 4.1, ASCII and binary. Run from mesh/data/.
set -e
for g in disk:2 lshape:2 cube_hole:3 two_materials:2; do
    name=${g%%:*}
    dim=${g##*:}
    for v in 22 41; do
        gmsh "$name.geo" -"$dim" -format "msh$v" -o "$name-$v-ascii.msh" > /dev/null
        gmsh "$name.geo" -"$dim" -format "msh$v" -bin -o "$name-$v-bin.msh" > /dev/null
    done
done
# Partitioned 4.1 files (elements in partition entities, lines and points
# on the partition boundaries, ghost cells listed apart): read as the
# whole mesh.
gmsh two_materials.geo -2 -format msh41 -part 3 -o two_materials-41-part3-ascii.msh > /dev/null
gmsh cube_hole.geo -3 -format msh41 -bin -part 3 -part_ghosts -o cube_hole-41-part3-ghosts-bin.msh > /dev/null
# One file of a split partitioned mesh (refused: it is a part).
gmsh two_materials.geo -2 -format msh41 -part 3 -setnumber Mesh.PartitionSplitMeshFiles 1 -o split.msh > /dev/null
mv split_2.msh two_materials-41-part3-split_2.msh
rm split_1.msh split_3.msh
