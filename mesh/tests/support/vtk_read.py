"""Reads a .pvd collection and every .vtu it lists with VTK's own parsers
(vtkXMLDataParser for the collection, as ParaView's PVD reader does;
vtkXMLUnstructuredGridReader for the grids) and prints what they hold as
JSON, for mesh/tests/vtk.rs to compare with what it wrote.

Usage: python3 vtk_read.py FILE.pvd | FILE.vtu"""
import json
import os
import sys

from vtkmodules.vtkIOXML import vtkXMLUnstructuredGridReader
from vtkmodules.vtkIOXMLParser import vtkXMLDataParser


def array(a):
    n, c = a.GetNumberOfTuples(), a.GetNumberOfComponents()
    return {"components": c, "values": [a.GetComponent(i, k) for i in range(n) for k in range(c)]}


def read_vtu(path):
    r = vtkXMLUnstructuredGridReader()
    r.SetFileName(path)
    r.Update()
    if r.GetErrorCode() != 0:
        raise SystemExit(f"{path}: VTK reader error {r.GetErrorCode()}")
    g = r.GetOutput()
    pts = g.GetPoints()
    cells = []
    types = []
    for c in range(g.GetNumberOfCells()):
        ids = g.GetCell(c).GetPointIds()
        cells.append([ids.GetId(k) for k in range(ids.GetNumberOfIds())])
        types.append(g.GetCellType(c))
    pd, cd = g.GetPointData(), g.GetCellData()
    return {
        "points": [list(pts.GetPoint(i)) for i in range(g.GetNumberOfPoints())] if pts else [],
        "cells": cells,
        "types": types,
        "point_data": {pd.GetArrayName(i): array(pd.GetArray(i)) for i in range(pd.GetNumberOfArrays())},
        "cell_data": {cd.GetArrayName(i): array(cd.GetArray(i)) for i in range(cd.GetNumberOfArrays())},
    }


def read_pvd(path):
    p = vtkXMLDataParser()
    p.SetFileName(path)
    if not p.Parse():
        raise SystemExit(f"{path}: not a VTK XML file")
    root = p.GetRootElement()
    if root.GetAttribute("type") != "Collection":
        raise SystemExit(f"{path}: type is {root.GetAttribute('type')}, not Collection")
    coll = root.FindNestedElementWithName("Collection")
    out = []
    for i in range(coll.GetNumberOfNestedElements()):
        e = coll.GetNestedElement(i)
        f = os.path.join(os.path.dirname(path), e.GetAttribute("file"))
        out.append({"timestep": float(e.GetAttribute("timestep")), "file": e.GetAttribute("file"), "grid": read_vtu(f)})
    return out


path = sys.argv[1]
json.dump(read_pvd(path) if path.endswith(".pvd") else read_vtu(path), sys.stdout)
