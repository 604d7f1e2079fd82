package dev.shuffled.client;

import java.nio.charset.StandardCharsets;

/**
 * The client-side checks of request fields, as docs/protocol.md states them. Each returns null
 * when the value is fine, else what is wrong with it.
 */
final class Check {
  private Check() {}

  /**
   * A plain name (app id, executor id): 1..255 bytes of UTF-8, no '/', not starting with '.' (the
   * daemon's own files do), no controls.
   */
  static String plainName(String s) {
    if (s == null || s.isEmpty()) {
      return "empty";
    }
    int n = s.getBytes(StandardCharsets.UTF_8).length;
    if (n > Wire.MAX_NAME) {
      return "length " + n + " bytes exceeds " + Wire.MAX_NAME;
    }
    if (s.equals(".") || s.equals("..")) {
      return "\"" + s + "\" is not a plain name";
    }
    if (s.startsWith(".")) {
      return "\"" + s + "\" starts with '.', which only the daemon's own files may";
    }
    for (int i = 0; i < s.length(); ) {
      int c = s.codePointAt(i);
      if (c <= 0xFFFF && Character.isSurrogate((char) c)) {
        return "\"" + s + "\" is not valid UTF-16 (lone surrogate)";
      }
      if (c == '/') {
        return "\"" + s + "\" contains '/'";
      }
      if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0)) {
        return String.format("\"%s\" contains control character U+%04X", s, c);
      }
      i += Character.charCount(c);
    }
    return null;
  }

  /** A local dir: absolute, <= 4095 bytes, no NUL, no . or .. component. */
  static String localDir(String p) {
    if (p == null || p.isEmpty()) {
      return "empty path";
    }
    int n = p.getBytes(StandardCharsets.UTF_8).length;
    if (n > Wire.MAX_PATH) {
      return "length " + n + " bytes exceeds " + Wire.MAX_PATH;
    }
    if (p.charAt(0) != '/') {
      return "\"" + p + "\" is not absolute";
    }
    if (p.indexOf('\0') >= 0) {
      return "\"" + p + "\" contains NUL";
    }
    for (String c : p.split("/", -1)) {
      if (c.equals(".") || c.equals("..")) {
        return "\"" + p + "\" has a \"" + c + "\" component";
      }
    }
    return null;
  }

  /** A token (codec, checksum, stat name): <= 32 bytes of [A-Za-z0-9._-]. */
  static String token(String s) {
    if (s.length() > Wire.MAX_TOKEN) {
      return "length " + s.length() + " exceeds " + Wire.MAX_TOKEN;
    }
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      boolean ok =
          (c >= 'a' && c <= 'z')
              || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9')
              || c == '.'
              || c == '_'
              || c == '-';
      if (!ok) {
        return "\"" + s + "\": character " + i + " is '" + c + "', want [A-Za-z0-9._-]";
      }
    }
    return null;
  }

  /**
   * Partition offsets of a payload of {@code length} bytes: at least 2 entries, [0] = 0,
   * non-decreasing, last = length.
   */
  static String offsets(long[] off, long length) {
    return offsets(off, length, "the payload length");
  }

  /**
   * Offsets of {@code last} units (bytes, rows): at least 2 entries, [0] = 0, non-decreasing, the
   * last = {@code last}, which errors call {@code lastName}.
   */
  static String offsets(long[] off, long last, String lastName) {
    if (off.length < 2) {
      return off.length + " offsets, want numPartitions+1 >= 2";
    }
    if (off[0] != 0) {
      return "[0] = " + off[0] + ", want 0";
    }
    for (int i = 1; i < off.length; i++) {
      if (off[i] < off[i - 1]) {
        return "[" + i + "] = " + off[i] + " below [" + (i - 1) + "] = " + off[i - 1];
      }
    }
    if (off[off.length - 1] != last) {
      return "last = " + off[off.length - 1] + ", want " + lastName + " " + last;
    }
    return null;
  }

  /** Text of at most {@code max} bytes of UTF-8 without NUL (a schema field's name or type). */
  static String text(String s, int max) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isSurrogate(c)
          && !(Character.isHighSurrogate(c)
              && i + 1 < s.length()
              && Character.isLowSurrogate(s.charAt(i + 1)))) {
        return "\"" + s + "\" is not valid UTF-16 (lone surrogate)";
      }
      if (Character.isHighSurrogate(c)) {
        i++;
      } else if (c == 0) {
        return "\"" + s + "\" contains NUL";
      }
    }
    int n = s.getBytes(StandardCharsets.UTF_8).length;
    if (n > max) {
      return "length " + n + " bytes exceeds " + max;
    }
    return null;
  }
}
