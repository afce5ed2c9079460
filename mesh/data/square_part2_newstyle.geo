// A unit square, partitioned in two and saved in format 2.2 with
// `Mesh.PartitionOldStyleMsh2 = 0`: Gmsh moves the elements into new
// physical groups `_part{..}_physical{..}_dim{..}`, leaving the model's
// groups empty (refused, saying so).
SetFactory("OpenCASCADE");
Rectangle(1) = {0,0,0,1,1};
Mesh.MeshSizeMax = 0.2;
Physical Surface("domain") = {1};
Physical Curve("boundary_all") = {1,2,3,4};
