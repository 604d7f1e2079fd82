package dev.shuffled.client;

/**
 * What a removal freed.
 *
 * @param mapOutputs map outputs removed (counted by index files)
 * @param bytes bytes freed
 */
public record Removed(long mapOutputs, long bytes) {}
