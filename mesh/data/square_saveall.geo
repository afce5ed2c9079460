// A unit square saved with `Mesh.SaveAll = 1`: in format 2.2 Gmsh then
// gives every element physical tag 0 although `$PhysicalNames` lists the
// groups (refused, saying so); in 4.1 the groups are read.
SetFactory("OpenCASCADE");
Rectangle(1) = {0,0,0,1,1};
Mesh.MeshSizeMax = 0.2;
Mesh.SaveAll = 1;
Physical Surface("domain") = {1};
Physical Curve("boundary_all") = {1,2,3,4};
