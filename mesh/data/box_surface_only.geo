// A box with a physical surface (its top face, z = 1) and no physical
// volume: Gmsh saves only the face's triangles, not the tetrahedra
// (refused, saying a `Physical Volume` is missing).
SetFactory("OpenCASCADE");
Box(1) = {0,0,0,1,1,1};
Mesh.MeshSizeMax = 0.25;
Physical Surface("top") = {6};
