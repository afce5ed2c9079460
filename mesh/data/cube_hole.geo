// The unit cube with a square hole through it: [0,1]^3 minus
// [0.35,0.65]^2 x [0,1]. Volume 0.91; boundary area 7.02, of which the
// hole's four faces are 1.2. Physical surfaces "hole" and "outer",
// physical volume "solid". Mesh size 0.2 (about two thousand tetrahedra).
// Regenerate with mesh/data/generate.sh.
SetFactory("OpenCASCADE");
Box(1) = {0, 0, 0, 1, 1, 1};
Box(2) = {0.35, 0.35, 0, 0.3, 0.3, 1};
BooleanDifference(3) = { Volume{1}; Delete; }{ Volume{2}; Delete; };
e = 1e-6;
hole() = Surface In BoundingBox{0.35 - e, 0.35 - e, -e, 0.65 + e, 0.65 + e, 1 + e};
all() = Surface{:};
outer() = all();
outer() -= hole();
Physical Surface("hole") = {hole()};
Physical Surface("outer") = {outer()};
Physical Volume("solid") = {3};
Mesh.MeshSizeMax = 0.2;
