package dev.shuffled.client;

/**
 * One shuffle of an application with committed map outputs.
 *
 * @param shuffleId the shuffle id
 * @param mapOutputs committed map outputs
 * @param bytes bytes on disk
 */
public record ShuffleInfo(int shuffleId, long mapOutputs, long bytes) {}
