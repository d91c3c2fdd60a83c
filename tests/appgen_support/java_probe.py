"""The start shared by the JVM probes of the app tests: a Probe class with the camera-frame helper, for either
Java API (``org.pytorch`` of PyTorch Mobile, ``org.pytorch.executorch``); each test appends its own methods and
closes the class."""


def probe_head(package: str, api: str) -> str:
    """``package`` line, the imports (``api``'s Module and Tensor), ``public class Probe {`` and ``frame(rgb, size)``:
    a Bitmap of size x size pixels from packed RGB bytes."""
    return f"""package {package};

import android.graphics.Bitmap;
import java.io.FileOutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;
import {api}.Module;
import {api}.Tensor;

public class Probe {{
    static Bitmap frame(byte[] rgb, int size) {{
        int[] colors = new int[size * size];
        for (int i = 0; i < colors.length; i++) {{
            colors[i] = 0xff000000 | ((rgb[3 * i] & 0xff) << 16) | ((rgb[3 * i + 1] & 0xff) << 8) | (rgb[3 * i + 2] & 0xff);
        }}
        return Bitmap.createBitmap(colors, size, size, Bitmap.Config.ARGB_8888);
    }}
"""
