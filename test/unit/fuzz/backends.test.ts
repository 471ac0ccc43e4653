import { fuzzSuite } from '../../helpers/fuzzProperties.js';

fuzzSuite('backends');
