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
# Files Gmsh writes that read as another mesh than the model's, refused
# saying why: `Mesh.SaveAll = 1` in 2.2 (every element in no group; the
# 4.1 files are read), a box with a physical surface and no physical
# volume (no tetrahedra saved), a 2.2 partitioned mesh in the new style
# (the elements moved to `_part{..}` groups).
for v in 22 41; do
    gmsh square_saveall.geo -2 -format "msh$v" -o "square_saveall-$v-ascii.msh" > /dev/null
    gmsh square_saveall.geo -2 -format "msh$v" -bin -o "square_saveall-$v-bin.msh" > /dev/null
    gmsh box_surface_only.geo -3 -format "msh$v" -o "box_surface_only-$v-ascii.msh" > /dev/null
    gmsh box_surface_only.geo -3 -format "msh$v" -bin -o "box_surface_only-$v-bin.msh" > /dev/null
done
gmsh box_bottom_only.geo -3 -format msh41 -o box_bottom_only-41-ascii.msh > /dev/null
gmsh box_bottom_only.geo -3 -format msh41 -bin -o box_bottom_only-41-bin.msh > /dev/null
for b in ascii bin; do
    flag=; [ $b = bin ] && flag=-bin
    gmsh square_part2_newstyle.geo -2 -part 2 -setnumber Mesh.PartitionOldStyleMsh2 0 -format msh22 $flag \
        -o "square_part2_newstyle-22-$b.msh" > /dev/null
done
