// As box_surface_only.geo with the bottom face (z = 0): a 2.2 file of it
// is a valid planar triangle mesh, but the 4.1 file lists the volume in
// `$Entities` (refused).
SetFactory("OpenCASCADE");
Box(1) = {0,0,0,1,1,1};
Mesh.MeshSizeMax = 0.25;
Physical Surface("bottom") = {5};
