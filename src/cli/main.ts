#!/usr/bin/env node
import { registerDemo } from './commands/demo.js';
import { registerPlan } from './commands/plan.js';
import { registerDashboard } from './commands/dashboard.js';
import { registerErrors } from './commands/errors.js';
import { registerSimulate } from './commands/simulate.js';
import { registerStats } from './commands/stats.js';
import { buildProgram, runProgram } from './program.js';

const program = buildProgram();

registerDemo(program);
registerDashboard(program);
registerErrors(program);
registerSimulate(program);
registerStats(program);
registerPlan(program);

void runProgram(program, process.argv).then((code) => {
  if (code !== 0) process.exitCode = code;
});
