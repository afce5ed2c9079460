// The unit disk: four arcs, physical curves "upper" (y >= 0) and "lower",
// physical surface "disk". Mesh size 0.2 (a few hundred triangles).
// Regenerate with mesh/data/generate.sh.
h = 0.2;
Point(1) = {0, 0, 0, h};
Point(2) = {1, 0, 0, h};
Point(3) = {0, 1, 0, h};
Point(4) = {-1, 0, 0, h};
Point(5) = {0, -1, 0, h};
Circle(1) = {2, 1, 3};
Circle(2) = {3, 1, 4};
Circle(3) = {4, 1, 5};
Circle(4) = {5, 1, 2};
Curve Loop(1) = {1, 2, 3, 4};
Plane Surface(1) = {1};
Physical Curve("upper") = {1, 2};
Physical Curve("lower") = {3, 4};
Physical Surface("disk") = {1};
