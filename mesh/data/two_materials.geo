// The unit square in two materials: "left" [0, 0.5] x [0, 1] and "right"
// [0.5, 1] x [0, 1], with the line x = 0.5 between them as the physical
// curve "interface" (inside the domain: interior facets) and the outer
// boundary as "outer". Mesh size 0.1 (a few hundred triangles).
// Regenerate with mesh/data/generate.sh.
h = 0.1;
Point(1) = {0, 0, 0, h};
Point(2) = {0.5, 0, 0, h};
Point(3) = {1, 0, 0, h};
Point(4) = {1, 1, 0, h};
Point(5) = {0.5, 1, 0, h};
Point(6) = {0, 1, 0, h};
Line(1) = {1, 2};
Line(2) = {2, 3};
Line(3) = {3, 4};
Line(4) = {4, 5};
Line(5) = {5, 6};
Line(6) = {6, 1};
Line(7) = {2, 5};
Curve Loop(1) = {1, 7, 5, 6};
Plane Surface(1) = {1};
Curve Loop(2) = {2, 3, 4, -7};
Plane Surface(2) = {2};
Physical Curve("interface") = {7};
Physical Curve("outer") = {1, 2, 3, 4, 5, 6};
Physical Surface("left") = {1};
Physical Surface("right") = {2};
